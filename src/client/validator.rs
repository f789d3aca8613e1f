//! JSON Schema validators, from the companion library `libmcplug_schema` (`src/schema/`).
//!
//! The validators (jsonschema, with its regex engines) are a library of their own because they
//! were most of what loading libmcplug cost every host, schemas or not (see `src/schema/lib.rs`).
//! It is loaded here the first time a schema is compiled, and stays loaded.
//!
//! Where it is looked for, in order (the first that exists is used):
//! - `MCPLUG_SCHEMA_LIBRARY`, a path, when set (then nothing else);
//! - beside the file holding this code (libmcplug, or a program that links the engine), and in
//!   its `deps/` folder, where cargo builds it as libmcplug's dependency;
//! - for a program in a cargo `deps/` or `examples/` folder (a Rust test, an example), beside
//!   that folder and in its sibling `deps/`.
//!
//! A library found there but of another version (or another interface) is refused. When none
//! can be used, compiling any schema fails with a message that says what was looked for: the
//! schema is then not used (the tool is called unchecked) and the host is warned, as for a
//! schema that does not compile.

use once_cell::sync::OnceCell;
use serde_json::Value;
use std::ffi::{c_char, c_void, CStr, OsStr};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// The companion's interface version this engine speaks (`mcplug_schema::ABI`).
const ABI: u32 = 1;
/// Names the companion's path, overriding the search.
pub const LIBRARY_ENV: &str = "MCPLUG_SCHEMA_LIBRARY";

type CompileFn = unsafe extern "C" fn(*const u8, usize, *mut *mut c_char) -> *mut c_void;
type CheckFn =
    unsafe extern "C" fn(*const c_void, *const u8, usize, usize, *mut *mut c_char) -> i32;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type StringFreeFn = unsafe extern "C" fn(*mut c_char);

/// The companion's functions, and the library they are in (held in a static, so never closed:
/// validators live as long as anyone holds them, and the library with them; a library refused
/// while being checked is closed at once).
struct Companion {
    compile: CompileFn,
    check: CheckFn,
    free: FreeFn,
    string_free: StringFreeFn,
    _library: libloading::os::unix::Library,
}

static COMPANION: OnceCell<Result<Companion, String>> = OnceCell::new();

fn companion() -> Result<&'static Companion, String> {
    COMPANION.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// The companion's file name on this platform (`libmcplug_schema.so`).
pub fn file_name() -> String {
    format!(
        "{}mcplug_schema{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

fn load() -> Result<Companion, String> {
    let name = file_name();
    let mut tried = Vec::new();
    for path in candidates(&name) {
        if !path.exists() {
            tried.push(format!("{} (not there)", path.display()));
            continue;
        }
        match open(&path) {
            Ok(c) => return Ok(c),
            Err(why) => tried.push(format!("{} ({why})", path.display())),
        }
    }
    Err(format!(
        "JSON Schema checks need {name}, the validator library built with libmcplug, which could \
         not be loaded: {}; put it beside libmcplug or set {LIBRARY_ENV} to its path",
        if tried.is_empty() {
            "no place to look for it was found".to_string()
        } else {
            tried.join("; ")
        }
    ))
}

fn candidates(name: &str) -> Vec<PathBuf> {
    if let Some(path) = std::env::var_os(LIBRARY_ENV) {
        return vec![PathBuf::from(path)];
    }
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(dir) = own_dir() {
        let mut dirs = vec![dir.clone(), dir.join("deps")];
        if matches!(
            dir.file_name().and_then(OsStr::to_str),
            Some("deps" | "examples")
        ) {
            if let Some(up) = dir.parent() {
                dirs.push(up.to_path_buf());
                dirs.push(up.join("deps"));
            }
        }
        for d in dirs {
            let path = d.join(name);
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The folder of the file this code was loaded from: libmcplug itself, or the program that links
/// the engine.
fn own_dir() -> Option<PathBuf> {
    let file = match crate::sys::dl::own_file() {
        Some(f) if f.exists() => f,
        _ => std::env::current_exe().ok()?,
    };
    let file = std::fs::canonicalize(&file).unwrap_or(file);
    file.parent().map(Path::to_path_buf)
}

/// Loads the companion at `path` (`RTLD_LOCAL`: its symbols stay its own) and checks that it is
/// the companion of this version before taking its functions.
fn open(path: &Path) -> Result<Companion, String> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading a library runs its initialisers; this one is ours (checked below before
    // any of its functions but the two version ones is called).
    let lib =
        unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| e.to_string())?;
    /// A function of the companion's, by name.
    ///
    /// # Safety
    /// `T` must be the type of the companion's function of that name.
    unsafe fn function<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
        // SAFETY: the caller vouches for `T`; the pointer is copied out of the symbol, and the
        // library stays loaded as long as the companion (for ever, once accepted).
        unsafe { lib.get::<T>(name.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|_| format!("it has no {name}"))
    }
    // SAFETY: each function is the companion's of that name and signature (src/schema/lib.rs),
    // its interface version checked first.
    unsafe {
        let abi: extern "C" fn() -> u32 = function(&lib, "mcplug_schema_abi")?;
        if abi() != ABI {
            return Err(format!(
                "its interface is version {}, this libmcplug speaks {ABI}",
                abi()
            ));
        }
        let version: extern "C" fn() -> *const c_char = function(&lib, "mcplug_schema_version")?;
        let theirs = CStr::from_ptr(version()).to_string_lossy();
        if theirs != env!("CARGO_PKG_VERSION") {
            return Err(format!(
                "it is version {theirs}, this libmcplug is {}",
                env!("CARGO_PKG_VERSION")
            ));
        }
        Ok(Companion {
            compile: function(&lib, "mcplug_schema_compile")?,
            check: function(&lib, "mcplug_schema_check")?,
            free: function(&lib, "mcplug_schema_free")?,
            string_free: function(&lib, "mcplug_schema_string_free")?,
            _library: lib,
        })
    }
}

/// A compiled schema (JSON Schema 2020-12 unless its `$schema` names draft 4, 6, 7 or 2019-09;
/// no external `$ref` is ever fetched).
pub struct Validator {
    compiled: NonNull<c_void>,
    lib: &'static Companion,
}

// SAFETY: the companion's validators are immutable once compiled and may be used by many threads
// at once (jsonschema's `Validator` is Send + Sync).
unsafe impl Send for Validator {}
// SAFETY: as for Send: nothing of a compiled validator changes after compiling.
unsafe impl Sync for Validator {}

impl Validator {
    /// Compiles a schema (JSON text); the error says why it does not compile, or why no
    /// validator library could be loaded. Compiling recurses deeply: call it on a large stack.
    pub fn compile(text: &str) -> Result<Validator, String> {
        let lib = companion()?;
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: text is `len` readable bytes; `error` is written only on failure.
        let compiled = unsafe { (lib.compile)(text.as_ptr(), text.len(), &mut error) };
        match NonNull::new(compiled) {
            Some(compiled) => Ok(Validator { compiled, lib }),
            None => Err(lib.take(error, "the schema does not compile")),
        }
    }

    /// Checks an instance (JSON text): `None` when it matches, else at most `max` violations
    /// `{"message", "instance_path", "schema_path"}`.
    pub fn check(&self, instance: &str, max: usize) -> Result<Option<Vec<Value>>, String> {
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: a live validator of this library; instance is `len` readable bytes.
        let status = unsafe {
            (self.lib.check)(
                self.compiled.as_ptr(),
                instance.as_ptr(),
                instance.len(),
                max,
                &mut out,
            )
        };
        match status {
            1 => Ok(None),
            0 => serde_json::from_str(&self.lib.take(out, "[]"))
                .map(Some)
                .map_err(|e| e.to_string()),
            _ => Err(self.lib.take(out, "the check failed")),
        }
    }
}

impl Drop for Validator {
    fn drop(&mut self) {
        // SAFETY: compiled by this library, freed once.
        unsafe { (self.lib.free)(self.compiled.as_ptr()) };
    }
}

impl Companion {
    /// An owned string of the companion, copied and freed (`otherwise` when it gave none).
    fn take(&self, text: *mut c_char, otherwise: &str) -> String {
        if text.is_null() {
            return otherwise.to_string();
        }
        // SAFETY: a NUL-terminated string the companion handed over, freed once.
        let copy = unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: the companion's own string, copied above and freed here, once.
        unsafe { (self.string_free)(text) };
        copy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_companion_is_found_beside_a_cargo_build() {
        // This test binary is in target/<profile>/deps/, where cargo also built the companion.
        let v = Validator::compile(r#"{"type": "integer"}"#).expect("the companion loads");
        assert_eq!(v.check("3", 8).unwrap(), None);
        let found = v.check(r#""x""#, 8).unwrap().unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0]["instance_path"], "");
        assert!(v.check("{", 8).unwrap_err().contains("EOF"));
        let e = Validator::compile(r#"{"type": 12}"#).err().unwrap();
        assert!(e.contains("12"), "{e}");
    }

    #[test]
    fn a_library_that_is_not_the_companion_is_refused() {
        #[cfg(target_os = "linux")]
        {
            let e = open(Path::new("libm.so.6")).err().unwrap();
            assert_eq!(e, "it has no mcplug_schema_abi");
            let e = open(Path::new("/nonexistent/libmcplug_schema.so"))
                .err()
                .unwrap();
            assert!(e.contains("No such file"), "{e}");
        }
    }

    #[test]
    fn the_search_names_the_cargo_layouts() {
        let name = file_name();
        #[cfg(target_os = "linux")]
        assert_eq!(name, "libmcplug_schema.so");
        let places = candidates(&name);
        // A unit-test binary lives in deps/: it and its parent are searched.
        assert!(places.iter().any(|p| p.parent().unwrap().ends_with("deps")));
        assert!(places.iter().all(|p| p.ends_with(&name)));
    }
}
