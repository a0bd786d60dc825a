//! Pages of the executable touched only while starting, taken out of the daemon's resident set
//! once it is up.
//!
//! Starting touches code and read-only data all over the binary (configuration, the tool
//! registry, every channel's set-up), and the kernel maps up to 16 neighbouring pages with each
//! page it faults in (fault-around): measured on the idle daemon, 10 of the 11.9 MiB of `.text`
//! and all of `.rodata` stayed resident although the idle loop uses a small part of them
//! (BENCHMARKS.md, "Binary size and resident pages"). Some seconds after start the read-only
//! segments of the executable are unmapped with `madvise(MADV_DONTNEED)`: they are never written
//! (no text relocations; the relocated `.data.rel.ro` is in a writable segment, left alone), so
//! each page stays in the page cache and the next access maps it again from there (a minor
//! fault, no I/O). The kernel can then reclaim what is not used any more like any unmapped file
//! cache.
//!
//! What the idle loop maps again is then its own code only, and the release build lays that
//! code out together at the start of `.text` (`build.rs`, `packaging/hot-functions.order`), so it
//! comes back as a few large pieces instead of one piece in every region of the binary.

use std::time::Duration;

/// How long after start-up the pages are released: the channels have connected by then.
pub const AFTER_START: Duration = Duration::from_secs(10);

/// Release the executable's start-up pages after [`AFTER_START`], on a blocking thread.
pub fn release_after_start() {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async {
            tokio::time::sleep(AFTER_START).await;
            let _ = ethan_core::task::spawn_blocking(release).await;
        });
    }
}

/// Unmap the executable's read-only segments (code, read-only data); returns the bytes advised.
#[cfg(target_os = "linux")]
pub fn release() -> usize {
    let mut advised = 0usize;
    // SAFETY: dl_iterate_phdr calls `each` with valid program headers of each loaded object, and
    // `advised` outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(each), (&raw mut advised).cast());
    }
    advised
}

#[cfg(not(target_os = "linux"))]
pub fn release() -> usize {
    0
}

/// The first object `dl_iterate_phdr` reports is the executable: its loadable segments that are
/// not writable are advised away; then the iteration stops.
#[cfg(target_os = "linux")]
unsafe extern "C" fn each(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the pointers come from dl_iterate_phdr (valid for this call) and from `release`.
    let (info, advised) = unsafe { (&*info, &mut *data.cast::<usize>()) };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_W != 0 || ph.p_memsz == 0 {
            continue;
        }
        let start = (info.dlpi_addr as usize + ph.p_vaddr as usize) / page * page;
        let end =
            (info.dlpi_addr as usize + (ph.p_vaddr + ph.p_memsz) as usize).div_ceil(page) * page;
        // SAFETY: the range is this segment's own mapping, never written (no copy-on-write pages
        // to lose): after MADV_DONTNEED its pages are mapped again from the file on access.
        if unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) }
            == 0
        {
            *advised += end - start;
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Code and constants of this very test binary still work after their pages were released.
    #[test]
    fn the_code_runs_on_after_its_pages_are_released() {
        static WORDS: [&str; 3] = ["one", "two", "three"];
        assert!(release() > 0);
        let joined = WORDS.join("+");
        assert_eq!(joined, "one+two+three");
        assert!(release() > 0);
        assert_eq!(format!("{:?}", WORDS.map(str::len)), "[3, 3, 5]");
    }
}
