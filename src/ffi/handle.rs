//! The handle protocol every opaque C handle follows: entry points *enter* the handle for as
//! long as they run, and freeing it closes what it holds, waits until every entry has left, then
//! frees. One implementation for the client's and the manager's handles.

use crate::error::Error;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The entry points running on one handle. Entering and leaving are one atomic each (the per-call
/// path); only a free in progress takes the lock, to sleep until the last entry leaves.
#[derive(Default)]
pub struct Entries {
    active: AtomicUsize,
    freeing: AtomicBool,
    lock: Mutex<()>,
    idle: Condvar,
}

impl Entries {
    fn leave(&self) {
        if self.active.fetch_sub(1, Ordering::SeqCst) == 1 && self.freeing.load(Ordering::SeqCst) {
            // Notified under the lock: the freeing thread checks `active` under it too, so the
            // wake-up cannot fall between its check and its wait.
            let _held = self.lock.lock();
            self.idle.notify_all();
        }
    }

    /// Blocks until no entry point runs on the handle.
    fn wait_idle(&self) {
        self.freeing.store(true, Ordering::SeqCst);
        let mut held = self.lock.lock();
        while self.active.load(Ordering::SeqCst) != 0 {
            self.idle.wait(&mut held);
        }
    }
}

/// A C handle: what it holds, and its entries.
pub trait Handle {
    /// The handle's name in errors (`client`, `manager`).
    const NAME: &'static str;
    fn entries(&self) -> &Entries;
}

/// An entry point inside a handle; leaves it when dropped.
pub struct Entered<'a, H: Handle>(pub &'a H);

impl<H: Handle> Drop for Entered<'_, H> {
    fn drop(&mut self) {
        self.0.entries().leave();
    }
}

/// Enters the handle at `ptr` (`invalid_argument` naming it when NULL).
pub fn enter<'a, H: Handle>(ptr: *mut H) -> Result<Entered<'a, H>, Error> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("`{}` is NULL", H::NAME)));
    }
    // SAFETY: not NULL, and by the module's contract a handle this library returned that has not
    // been freed: `free` waits for every entry to leave before it frees.
    let handle = unsafe { &*ptr };
    handle.entries().active.fetch_add(1, Ordering::SeqCst);
    Ok(Entered(handle))
}

/// Hands a new handle to the host (its pointer, for `Box::from_raw` in `free`).
pub fn into_raw<H: Handle>(handle: H) -> *mut H {
    // A child forked from here on must know that this handle is not its own.
    crate::sys::fork::watch();
    Box::into_raw(Box::new(handle))
}

/// Frees the handle at `ptr` (NULL: nothing): `close` ends what it holds (making the calls
/// inside it return), then this waits for every entry to leave and frees it. A panic inside is
/// contained (the handle is then leaked, never freed twice).
///
/// In a child forked after the library started, this returns at once and frees nothing: the
/// handle's servers, pipes and sockets are the parent's, and the threads its entries and its
/// close would wait for do not exist in the child (the memory goes when the child exits).
///
/// # Safety
/// `ptr` is NULL or a pointer `into_raw` returned that was not freed before; the host may not use
/// it again.
pub unsafe fn free<H: Handle>(ptr: *mut H, close: impl FnOnce(&H)) {
    if ptr.is_null() || crate::sys::fork::forked_from().is_some() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: not NULL and live (this function's contract); freed only below.
        let handle = unsafe { &*ptr };
        close(handle);
        handle.entries().wait_idle();
        // SAFETY: from Box::into_raw in `into_raw`, freed once, and no entry is inside it.
        drop(unsafe { Box::from_raw(ptr) });
    }));
}

#[cfg(test)]
mod tests {
    use super::{enter, free, into_raw, Entries, Handle};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    struct Thing {
        entries: Entries,
        closed: Arc<AtomicBool>,
    }

    impl Handle for Thing {
        const NAME: &'static str = "thing";
        fn entries(&self) -> &Entries {
            &self.entries
        }
    }

    #[test]
    fn free_waits_for_the_calls_inside_and_null_is_named() {
        let e = enter::<Thing>(std::ptr::null_mut())
            .err()
            .expect("NULL is refused");
        assert!(e.message.contains("`thing` is NULL"), "{}", e.message);
        let closed = Arc::new(AtomicBool::new(false));
        let ptr = into_raw(Thing {
            entries: Entries::default(),
            closed: closed.clone(),
        });
        let addr = ptr as usize;
        let left = Arc::new(AtomicBool::new(false));
        let (inside, is_inside) = std::sync::mpsc::channel();
        let call = {
            let left = left.clone();
            std::thread::spawn(move || {
                let h = enter(addr as *mut Thing).unwrap();
                inside.send(()).unwrap();
                while !h.0.closed.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(Duration::from_millis(30));
                left.store(true, Ordering::SeqCst);
            })
        };
        is_inside.recv().unwrap();
        // SAFETY: `ptr` came from into_raw and is freed once.
        unsafe { free(ptr, |t| t.closed.store(true, Ordering::SeqCst)) };
        assert!(
            left.load(Ordering::SeqCst),
            "free returned while a call was inside"
        );
        call.join().unwrap();
        assert!(closed.load(Ordering::SeqCst));
    }
}
