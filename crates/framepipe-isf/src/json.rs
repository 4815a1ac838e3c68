//! Reading header values: the types ISF asks for, with the leniency real ISF files need
//! (a whole number where a float is asked for, a number or a `"true"`/`"1"` string where a flag
//! is), and an error naming the place and the value otherwise.

use crate::error::{describe, Error, Result};
use serde_json::Value;

pub(crate) fn wrong(at: &str, expected: &str, found: &Value) -> Error {
    Error::Header {
        at: at.to_string(),
        message: format!("expected {expected}, found {}", describe(found)),
    }
}

/// A string.
pub(crate) fn string(v: &Value, at: &str) -> Result<String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| wrong(at, "a string", v))
}

/// A finite number: a JSON number, or a string holding one.
pub(crate) fn number(v: &Value, at: &str) -> Result<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    n.filter(|n| n.is_finite())
        .ok_or_else(|| wrong(at, "a number", v))
}

/// A whole number that fits GLSL's `int`.
pub(crate) fn int(v: &Value, at: &str) -> Result<i32> {
    let n = number(v, at).map_err(|_| wrong(at, "a whole number", v))?;
    if n.fract() != 0.0 || n < i32::MIN as f64 || n > i32::MAX as f64 {
        return Err(wrong(at, "a whole number within GLSL's int", v));
    }
    Ok(n as i32)
}

/// A flag: a bool, a number (positive is true, as VVISF reads `PERSISTENT: 1`) or a string
/// holding either (`"true"`, `"YES"`, `"0"`).
pub(crate) fn flag(v: &Value, at: &str) -> Result<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Number(_) => Ok(number(v, at)? > 0.0),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Ok(true),
            "false" | "no" | "" => Ok(false),
            t => t
                .parse::<f64>()
                .map(|n| n > 0.0)
                .map_err(|_| wrong(at, "true or false", v)),
        },
        _ => Err(wrong(at, "true or false", v)),
    }
}

/// An array of `N` numbers; with `fill`, the last may be missing and takes it (a colour's
/// alpha).
pub(crate) fn numbers<const N: usize>(v: &Value, at: &str, fill: Option<f64>) -> Result<[f64; N]> {
    let what = || {
        if fill.is_some() {
            format!("an array of {} or {N} numbers", N - 1)
        } else {
            format!("an array of {N} numbers")
        }
    };
    let arr = v.as_array().ok_or_else(|| wrong(at, &what(), v))?;
    let ok_len = arr.len() == N || (fill.is_some() && arr.len() + 1 == N);
    if !ok_len {
        return Err(wrong(at, &what(), v));
    }
    let mut out = [fill.unwrap_or(0.0); N];
    for (i, x) in arr.iter().enumerate() {
        out[i] = number(x, &format!("{at}[{i}]"))?;
    }
    Ok(out)
}
