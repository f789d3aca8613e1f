//! The shapes an option's value takes, each rule once, for every layer that reads a host's
//! options (a connection's, a call's, a manager's, a listing's, the log capture's): a time
//! limit, a flag, a count, an object, and the error for an option nobody knows. What is wrong
//! follows the option's name in an error (serde_path_to_error adds it where serde reads the
//! options, [`named`] where they are read by hand).

use crate::error::{Error, Result};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::time::Duration;

/// A timeout as the host can give it: absent = the default, `null` = no limit, N > 0 = N ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Limit {
    #[default]
    Default,
    Unbounded,
    After(Duration),
}

impl Limit {
    /// Resolves against a default that is itself `Some(limit)` or `None` (unbounded).
    pub fn or(self, default: Option<Duration>) -> Option<Duration> {
        match self {
            Limit::Default => default,
            Limit::Unbounded => None,
            Limit::After(d) => Some(d),
        }
    }
}

/// A time limit: `null` is none, else a positive number of milliseconds.
pub(crate) fn limit_value(v: &Value) -> std::result::Result<Limit, String> {
    match (v, v.as_u64()) {
        (Value::Null, _) => Ok(Limit::Unbounded),
        (_, Some(ms)) if ms > 0 => Ok(Limit::After(Duration::from_millis(ms))),
        _ => Err(format!(
            "must be a positive number of milliseconds, or null for no limit (got {v})"
        )),
    }
}

/// `true` or `false`; `null` is absent (the default).
pub(crate) fn flag_value(v: &Value) -> std::result::Result<Option<bool>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        v => Err(format!("must be true or false (got {v})")),
    }
}

/// A positive integer; `null` is absent (the default).
pub(crate) fn count_value(v: &Value) -> std::result::Result<Option<usize>, String> {
    match (v, v.as_u64()) {
        (Value::Null, _) => Ok(None),
        (_, Some(n)) if n > 0 => Ok(Some(n as usize)),
        _ => Err(format!("must be a positive integer (got {v})")),
    }
}

/// What is wrong with option `key`.
pub(crate) fn named(key: &str) -> impl FnOnce(String) -> Error + '_ {
    move |what| Error::invalid(format!("option `{key}` {what}"))
}

/// Absent is the default (`Limit::Default`, by `#[serde(default)]`).
impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        limit_value(&Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

pub(crate) fn flag<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<bool>, D::Error> {
    flag_value(&Value::deserialize(d)?).map_err(serde::de::Error::custom)
}

pub(crate) fn count<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<usize>, D::Error> {
    count_value(&Value::deserialize(d)?).map_err(serde::de::Error::custom)
}

/// `value` as an object; `what` names it in the error.
pub(crate) fn as_object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| Error::invalid(format!("{what} must be a JSON object (got {value})")))
}

/// An unknown option: the key, and the ones that would be understood (a misspelt option
/// silently ignored would leave, say, a call without its limit).
pub fn unknown_option(key: &str, known: &[&[&str]]) -> Error {
    let mut all: Vec<&str> = known.iter().flat_map(|k| k.iter().copied()).collect();
    all.sort_unstable();
    Error::invalid(format!(
        "unknown option `{key}` (the options here: {})",
        all.join(", ")
    ))
}

/// Option `key`'s time limit.
pub(crate) fn limit_of(key: &str, v: &Value) -> Result<Limit> {
    limit_value(v).map_err(named(key))
}

/// Option `key`'s flag.
pub(crate) fn bool_of(key: &str, v: &Value) -> Result<Option<bool>> {
    flag_value(v).map_err(named(key))
}

/// Option `key`'s count.
pub(crate) fn usize_of(key: &str, v: &Value) -> Result<Option<usize>> {
    count_value(v).map_err(named(key))
}
