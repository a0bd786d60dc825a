//! Tests' rival to a tool: a thread exchanging pairs of names of the file system
//! (`renameat2` with `RENAME_EXCHANGE`, no `link(2)` needed) as fast as it can, as a command
//! running beside the tool would.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The running swapper; [`Swapper::stop`] ends it.
pub(crate) struct Swapper {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Swapper {
    /// Exchange each pair of `pairs` in turn, over and over; returns once 100 exchanges are
    /// made. Every exchange must succeed (the thread panics otherwise, and [`Swapper::stop`]
    /// passes the panic on).
    pub(crate) async fn start(pairs: &[(&Path, &Path)]) -> Swapper {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
        let pairs: Vec<[CString; 2]> = pairs.iter().map(|(a, b)| [c(a), c(b)]).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let (swapping, counted) = (stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            while !swapping.load(Relaxed) {
                let [a, b] = &pairs[counted.fetch_add(1, Relaxed) % pairs.len()];
                // SAFETY: two NUL-terminated paths.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
            }
        });
        while swaps.load(Relaxed) < 100 {
            tokio::task::yield_now().await;
        }
        Swapper { stop, thread }
    }

    /// Stop swapping and wait for the thread.
    pub(crate) fn stop(self) {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap();
    }
}
