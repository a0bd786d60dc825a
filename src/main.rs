//! `ethan`: the command line, all of it in the library ([`ethan::entry`]).

fn main() -> std::process::ExitCode {
    ethan::entry::main()
}
