//! Which file the running code was loaded from (to find the companion library beside it).

use std::ffi::{c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The file holding this code: libmcplug, or the program that links the engine statically (the
/// loader names the main program with an empty name: then `None`). `dladdr` is the loader's;
/// neither rustix nor libloading asks it.
pub(crate) fn own_file() -> Option<PathBuf> {
    let here = own_file as *const c_void;
    // SAFETY: dladdr only reads the loader's tables; `info` is plain data it fills, valid all
    // zeroes; the name it points to lives as long as the object is loaded (ours is), and is
    // copied at once.
    let name = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(here, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        CStr::from_ptr(info.dli_fname).to_bytes().to_vec()
    };
    (!name.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(&name)))
}
