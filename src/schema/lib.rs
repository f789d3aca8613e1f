//! libmcplug_schema: mcplug's JSON Schema validators (jsonschema), in a library of their own.
//!
//! Why a second library: jsonschema and the two regex engines it needs were most of what a process
//! paid to load libmcplug — 16k of its 26k load-time relocations, 280 KiB of the 430 KiB of data
//! the loader writes, 4 MiB of its 9.7 MiB of code (BENCHMARKS.md, "cold start") — while most
//! hosts never check a schema. libmcplug loads this library the first time a tool's schema is
//! compiled (`src/client/validator.rs`), so only a host that checks schemas pays for it, then.
//!
//! The interface below is private to the two libraries: plain C functions over JSON text, which
//! libmcplug checks by [`mcplug_schema_abi`] and [`mcplug_schema_version`] before it uses any
//! other. Every function may be called from any thread; a validator may be used by many threads
//! at once. Nothing panics across the boundary (a panic becomes an error).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use jsonschema::{Retrieve, Uri, Validator};
use serde_json::{json, Value};
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Changes whenever a function below changes its signature or its meaning.
pub const ABI: u32 = 1;

/// The interface's version, [`ABI`].
#[no_mangle]
pub extern "C" fn mcplug_schema_abi() -> u32 {
    ABI
}

/// This library's version (a static NUL-terminated string): libmcplug uses only its own.
#[no_mangle]
pub extern "C" fn mcplug_schema_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Refuses every external resource: a schema's `$ref` may never make the client reach the
/// network or the file system (the spec's "MUST NOT auto-dereference").
struct NoExternalRefs;

impl Retrieve for NoExternalRefs {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "mcplug never fetches external schema references ({})",
            uri.as_str()
        )
        .into())
    }
}

/// Compiles one schema: 2020-12 unless its `$schema` names another draft; no external `$ref`.
pub fn compile(text: &str) -> Result<Validator, String> {
    let schema: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if !schema.is_object() && !schema.is_boolean() {
        return Err(format!("a schema is an object or a boolean, not {schema}"));
    }
    if !spans_at_most(&schema, EXPANSION_BUDGET) {
        return Err(format!(
            "the schema spans more than {EXPANSION_BUDGET} nodes once its $refs are followed: \
             checking an instance against it could cost time and memory without bound (a schema \
             of 20 $defs, each an anyOf of the one before twice, takes 7 s and 1.5 GiB for one \
             check, and doubles with each more)"
        ));
    }
    jsonschema::options()
        .with_retriever(NoExternalRefs)
        .build(&schema)
        .map_err(|e| e.to_string())
}

/// How many nodes a schema may span with its local `$ref`s followed where they stand (a
/// `$ref` back into the chain that led to it counts once: recursive schemas are fine). Tool
/// schemas span tens to hundreds; one past this is refused, so that no check of an instance
/// can go exponential in the schema (jsonschema gathers every failing branch's errors).
pub const EXPANSION_BUDGET: usize = 10_000;

/// Whether `schema`, every local `$ref` (`#...`) followed where it stands, has at most `budget`
/// nodes. Iterative, and it stops at the budget: a deep schema costs at most `budget` steps.
fn spans_at_most(schema: &Value, budget: usize) -> bool {
    /// The `$ref` targets that led to a node (a linked list shared by the nodes below it).
    struct Chain<'a> {
        target: &'a Value,
        up: Option<std::rc::Rc<Chain<'a>>>,
    }
    let on_chain = |mut chain: Option<&std::rc::Rc<Chain<'_>>>, target: &Value| {
        while let Some(link) = chain {
            if std::ptr::eq(link.target, target) {
                return true;
            }
            chain = link.up.as_ref();
        }
        false
    };
    let mut stack: Vec<(&Value, Option<std::rc::Rc<Chain<'_>>>)> = vec![(schema, None)];
    let mut seen = 0usize;
    while let Some((node, chain)) = stack.pop() {
        seen += 1;
        if seen > budget {
            return false;
        }
        match node {
            Value::Object(map) => {
                for (key, value) in map {
                    let target = (key == "$ref")
                        .then(|| value.as_str())
                        .flatten()
                        .and_then(|r| r.strip_prefix('#'))
                        .and_then(|pointer| schema.pointer(pointer));
                    match target {
                        Some(t) if on_chain(chain.as_ref(), t) => seen += 1,
                        Some(t) => stack.push((
                            t,
                            Some(std::rc::Rc::new(Chain {
                                target: t,
                                up: chain.clone(),
                            })),
                        )),
                        None => stack.push((value, chain.clone())),
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, chain.clone()))),
            _ => {}
        }
    }
    true
}

/// Checks an instance (JSON text): `Ok(None)` when it matches, else the first `max` violations
/// as `[{"message", "instance_path", "schema_path"}]`.
pub fn check(validator: &Validator, instance: &str, max: usize) -> Result<Option<Value>, String> {
    let instance: Value = serde_json::from_str(instance).map_err(|e| e.to_string())?;
    if validator.is_valid(&instance) {
        return Ok(None);
    }
    let found: Vec<Value> = validator
        .iter_errors(&instance)
        .take(max)
        .map(|e| {
            json!({
                "message": e.to_string(),
                "instance_path": e.instance_path().as_str(),
                "schema_path": e.schema_path().as_str(),
            })
        })
        .collect();
    Ok(Some(Value::Array(found)))
}

fn owned(text: String) -> *mut c_char {
    // JSON text and error messages have no NUL; should one appear, it goes.
    CString::new(text.replace('\0', ""))
        .expect("NULs removed")
        .into_raw()
}

fn panicked(payload: Box<dyn std::any::Any + Send>) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("the validator panicked: {what}")
}

/// # Safety
/// `text` is NULL or points to `len` readable bytes.
unsafe fn text_arg<'a>(text: *const u8, len: usize) -> Result<&'a str, String> {
    if text.is_null() {
        return Err("no text (NULL)".into());
    }
    // SAFETY: not NULL, and the caller vouches for `len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(text, len) };
    std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))
}

/// Compiles the schema in `text` (`len` bytes of JSON). Returns the validator, to be freed with
/// [`mcplug_schema_free`]; or NULL, with `*error` set to an owned message (freed with
/// [`mcplug_schema_string_free`]) saying why the schema does not compile.
///
/// # Safety
/// `text` points to `len` readable bytes; `error` is a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn mcplug_schema_compile(
    text: *const u8,
    len: usize,
    error: *mut *mut c_char,
) -> *mut Validator {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller vouches for `text` and `len` (this function's contract).
        compile(unsafe { text_arg(text, len) }?)
    }))
    .unwrap_or_else(|p| Err(panicked(p)));
    match outcome {
        Ok(v) => Box::into_raw(Box::new(v)),
        Err(why) => {
            if !error.is_null() {
                // SAFETY: not NULL, and writable by this function's contract.
                unsafe { *error = owned(why) };
            }
            std::ptr::null_mut()
        }
    }
}

/// Checks the instance in `instance` (`len` bytes of JSON) against `validator`. Returns 1 when it
/// matches (`*out` untouched); 0 when it does not, with `*out` an owned JSON array of at most
/// `max` violations `{"message", "instance_path", "schema_path"}`; -1 when it could not be checked
/// (not JSON, a panic), with `*out` an owned message. Strings are freed with
/// [`mcplug_schema_string_free`].
///
/// # Safety
/// `validator` came from [`mcplug_schema_compile`] and is not freed; `instance` points to `len`
/// readable bytes; `out` is a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn mcplug_schema_check(
    validator: *const Validator,
    instance: *const u8,
    len: usize,
    max: usize,
    out: *mut *mut c_char,
) -> i32 {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NULL or a live validator of ours (this function's contract).
        let v = unsafe { validator.as_ref() }.ok_or("no validator (NULL)")?;
        // SAFETY: the caller vouches for `instance` and `len`.
        check(v, unsafe { text_arg(instance, len) }?, max)
    }))
    .unwrap_or_else(|p| Err(panicked(p)));
    let (status, text) = match outcome {
        Ok(None) => return 1,
        Ok(Some(found)) => (0, found.to_string()),
        Err(why) => (-1, why),
    };
    if !out.is_null() {
        // SAFETY: not NULL, and writable by this function's contract.
        unsafe { *out = owned(text) };
    }
    status
}

/// Frees a validator of [`mcplug_schema_compile`]; NULL is a no-op.
///
/// # Safety
/// `validator` came from [`mcplug_schema_compile`] and is freed once.
#[no_mangle]
pub unsafe extern "C" fn mcplug_schema_free(validator: *mut Validator) {
    if !validator.is_null() {
        // SAFETY: a validator of ours, not freed before (this function's contract).
        drop(unsafe { Box::from_raw(validator) });
    }
}

/// Frees a string this library returned; NULL is a no-op.
///
/// # Safety
/// `text` came from this library and is freed once.
#[no_mangle]
pub unsafe extern "C" fn mcplug_schema_string_free(text: *mut c_char) {
    if !text.is_null() {
        // SAFETY: a string of ours, not freed before (this function's contract).
        drop(unsafe { CString::from_raw(text) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn take(s: *mut c_char) -> String {
        // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
        let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
        // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
        unsafe { mcplug_schema_string_free(s) };
        text
    }

    #[test]
    fn compiles_checks_and_reports_through_the_c_functions() {
        let schema = br#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;
        let mut err = std::ptr::null_mut();
        // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
        let v = unsafe { mcplug_schema_compile(schema.as_ptr(), schema.len(), &mut err) };
        assert!(!v.is_null() && err.is_null());
        let mut out = std::ptr::null_mut();
        let good = br#"{"n": 3}"#;
        assert_eq!(
            // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
            unsafe { mcplug_schema_check(v, good.as_ptr(), good.len(), 8, &mut out) },
            1
        );
        assert!(out.is_null());
        let bad = br#"{"n": "x"}"#;
        assert_eq!(
            // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
            unsafe { mcplug_schema_check(v, bad.as_ptr(), bad.len(), 8, &mut out) },
            0
        );
        let found: Value = serde_json::from_str(&take(out)).unwrap();
        assert_eq!(found[0]["instance_path"], "/n");
        assert!(found[0]["message"].as_str().unwrap().contains("integer"));
        let broken = b"{";
        assert_eq!(
            // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
            unsafe { mcplug_schema_check(v, broken.as_ptr(), 1, 8, &mut out) },
            -1
        );
        assert!(take(out).contains("EOF"));
        // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
        unsafe { mcplug_schema_free(v) };
    }

    #[test]
    fn a_schema_that_does_not_compile_says_why() {
        for (schema, why) in [
            (&br#"{"type": 12}"#[..], "12"),
            (br#"[1]"#, "an object or a boolean"),
            (
                br#"{"$ref": "https://example.com/s.json"}"#,
                "never fetches",
            ),
            (b"\xff", "not UTF-8"),
        ] {
            let mut err = std::ptr::null_mut();
            // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
            let v = unsafe { mcplug_schema_compile(schema.as_ptr(), schema.len(), &mut err) };
            assert!(v.is_null());
            let message = take(err);
            assert!(message.contains(why), "{message}");
        }
        assert_eq!(mcplug_schema_abi(), ABI);
        // SAFETY: live buffers of the test, and pointers these functions returned, each freed once.
        let version = unsafe { CStr::from_ptr(mcplug_schema_version()) };
        assert_eq!(version.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn a_schema_that_explodes_once_its_refs_are_followed_is_refused() {
        let doubling = |n: usize, combinator: &str| {
            let mut defs = serde_json::Map::new();
            defs.insert("d0".into(), json!({"type": "string"}));
            for i in 1..=n {
                let r = json!({"$ref": format!("#/$defs/d{}", i - 1)});
                defs.insert(format!("d{i}"), json!({ combinator: [r.clone(), r] }));
            }
            json!({"$defs": defs, "properties": {"x": {"$ref": format!("#/$defs/d{n}")}}})
                .to_string()
        };
        // Small enough: compiled and checked as ever.
        assert!(compile(&doubling(6, "anyOf")).is_ok());
        for combinator in ["anyOf", "allOf"] {
            let Err(e) = compile(&doubling(20, combinator)) else {
                panic!("a doubling {combinator} of 20 compiled")
            };
            assert!(e.contains("spans more than 10000 nodes"), "{e}");
        }
        // A recursive schema (a tree) is not an explosion: a $ref back into its chain counts once.
        let tree = json!({"$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node"});
        let v = compile(&tree.to_string()).expect("a tree compiles");
        assert!(check(&v, r#"{"children": [{"children": []}]}"#, 8)
            .unwrap()
            .is_none());
        assert!(check(&v, r#"{"children": [{"children": 5}]}"#, 8)
            .unwrap()
            .is_some());
    }
}
