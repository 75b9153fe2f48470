//! The builtins whose result can be far larger than their inputs, checked before they run.
//!
//! Fuel is charged for most of what a builtin produces only after it has run, and
//! `"a\nb"|indent(10000000000)` asks for 10 GB in one call: a failed allocation aborts the
//! process (the tab, in a browser). Each filter and string method below first bounds
//! the size of its result from its arguments and refuses one larger than the render's output
//! limit (what the context could hold: no prompt needs a longer string) with an error that
//! [`super::template`] reports as `TemplateError::TooLong`; otherwise it runs minijinja's own
//! implementation (kept under a hidden name) or pycompat's.
//!
//! | builtin | bound checked |
//! |---|---|
//! | `indent(width)` | len + lines × width |
//! | `replace(from, to)`, `.replace(old, new)` | len + matches × len(to) (matches: chars + 1 for "") |
//! | `join(sep)`, `.join(items)` | items ≤ limit and items × len(sep) |
//! | `format(…)`, `.format(…)` | every number in the format string (a width) ≤ limit |
//! | `tojson(indent)` | indent ≤ 64, a sequence's items ≤ limit |
//! | `pprint` | a sequence's items ≤ limit |
//!
//! minijinja 3.1's fuel already charges the bytes that `~`, `+` and `*` produce; these
//! builtins stay checked because it does not bound them before they allocate (measured with
//! the corpus: `join` of 10⁵ repeated 1 MB strings and `.format` with a 10¹⁰ width abort on the
//! allocation, `tojson(indent=10¹⁰)` runs past 30 s).

use std::cell::Cell;

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

thread_local! {
    /// The output limit of the render running on this thread (every render sets it through
    /// [`with_limit`]; this value is never read).
    static LIMIT: Cell<usize> = const { Cell::new(64 << 20) };
}

/// Runs `render` with `limit` as the bound of every checked builtin.
pub(super) fn with_limit<T>(limit: usize, render: impl FnOnce() -> T) -> T {
    let old = LIMIT.with(|l| l.replace(limit));
    let out = render();
    LIMIT.with(|l| l.set(old));
    out
}

/// The error a refused builtin raises (found again by [`is_too_big`]).
#[derive(Debug)]
struct TooBig;

impl std::fmt::Display for TooBig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("result larger than the output limit")
    }
}

impl std::error::Error for TooBig {}

/// Whether `err` (or its source chain) is a refusal of a checked builtin.
pub(super) fn is_too_big(err: &Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if e.downcast_ref::<TooBig>().is_some() {
            return true;
        }
        source = e.source();
    }
    false
}

/// Ok when `bytes` fit the render's limit.
fn check(what: &str, bytes: u128) -> Result<(), Error> {
    let limit = LIMIT.with(Cell::get);
    if bytes <= limit as u128 {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("{what} would build {bytes} bytes, more than the output limit of {limit}"),
    )
    .with_source(TooBig))
}

/// An upper bound of the bytes `v` takes as text (its `Display`): strings by length, numbers
/// and the like by 24 bytes, sequences and maps by their items plus separators, walked until
/// the bound passes `limit` (then `limit + 1`; also past 32 levels). JSON may escape a byte as
/// six (`\uXXXX`): `tojson` multiplies.
fn size_bound(v: &Value, limit: u128) -> u128 {
    fn walk(v: &Value, limit: u128, depth: u32) -> u128 {
        if let Some(s) = v.as_str() {
            return s.len() as u128;
        }
        match v.kind() {
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
                if depth > 32 || v.len().is_some_and(|n| n as u128 > limit) {
                    return limit + 1;
                }
                let Ok(items) = v.try_iter() else {
                    return 64;
                };
                let map = v.kind() == ValueKind::Map;
                let mut total = 2u128;
                for item in items {
                    total += 2 + walk(&item, limit, depth + 1);
                    if map {
                        if let Ok(value) = v.get_item(&item) {
                            total += 2 + walk(&value, limit, depth + 1);
                        }
                    }
                    if total > limit {
                        return limit + 1;
                    }
                }
                total
            }
            _ => 24,
        }
    }
    walk(v, limit, 0)
}

/// A keyword argument, without marking it used (the builtin reads it again).
fn kwarg(kwargs: &Kwargs, key: &str) -> Option<Value> {
    kwargs
        .peek::<Option<Value>>(key)
        .ok()
        .flatten()
        .filter(|v| !v.is_undefined())
}

fn limit() -> u128 {
    LIMIT.with(Cell::get) as u128
}

fn as_count(v: Option<Value>) -> Option<u128> {
    v.and_then(|v| i128::try_from(v).ok())
        .map(|n| n.max(0) as u128)
}

/// Upper bound of `s.replace(from, to)` where `s` is `s_len` bytes (chars at most as many).
fn replaced_len(s_len: u128, from: Option<&str>, s: Option<&str>, to: u128) -> u128 {
    let matches = match (from, s) {
        (Some(f), Some(s)) if !f.is_empty() => s.matches(f).count() as u128,
        _ => s_len + 1,
    };
    s_len.saturating_add(matches.saturating_mul(to))
}

/// The widths and precisions a format string asks for: after each `%` (printf style: flags,
/// width, `.precision`) and after each `:` inside `{…}` (str.format: fill, align, sign, `#`, `0`,
/// width, grouping, `.precision`); their largest.
fn widest(format: &str) -> u128 {
    let b = format.as_bytes();
    let number = |i: &mut usize| -> u128 {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        format[start..*i]
            .parse::<u128>()
            .unwrap_or(if *i > start { u128::MAX } else { 0 })
    };
    let mut widest = 0;
    let mut depth = 0u32;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        i += 1;
        let spec = match c {
            b'%' => true,
            b'{' => {
                depth += 1;
                false
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                false
            }
            b':' if depth > 0 => {
                // An optional fill character before an align character.
                if i + 1 < b.len() && b"<>^=".contains(&b[i + 1]) {
                    i += 2;
                }
                true
            }
            _ => false,
        };
        if !spec {
            continue;
        }
        while i < b.len() && b"-+ #0<>^=".contains(&b[i]) {
            i += 1;
        }
        widest = widest.max(number(&mut i));
        while i < b.len() && b",_".contains(&b[i]) {
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            widest = widest.max(number(&mut i));
        }
    }
    widest
}

/// `name` now checks `bound` on its arguments first, then runs minijinja's `builtin` (called
/// directly: it is not reachable from templates under any name).
fn wrap<F, Rv, Args>(
    env: &mut Environment<'static>,
    name: &'static str,
    builtin: F,
    bound: fn(&[Value], &Kwargs) -> Result<(), Error>,
) where
    F: minijinja::functions::Function<Rv, Args>,
    Rv: minijinja::value::FunctionResult,
    Args: for<'a> minijinja::value::FunctionArgs<'a>,
{
    let builtin = Value::from_function(builtin);
    env.add_filter(
        name,
        move |state: &mut State,
              value: &Value,
              rest: Rest<Value>,
              kwargs: Kwargs|
              -> Result<Value, Error> {
            let mut args = Vec::with_capacity(rest.0.len() + 2);
            args.push(value.clone());
            args.extend(rest.0);
            bound(&args, &kwargs)?;
            if kwargs.args().next().is_some() {
                args.push(Value::from(kwargs));
            }
            builtin.call(state, &args)
        },
    );
}

/// Installs the checked filters in `env` (after its builtins).
pub(super) fn install(env: &mut Environment<'static>) {
    wrap(env, "indent", minijinja::filters::indent, |a, k| {
        let width = as_count(a.get(1).filter(|v| v.kind() == ValueKind::Number).cloned())
            .or_else(|| as_count(kwarg(k, "width")))
            .unwrap_or(4);
        let s_len = a.first().map_or(0, |v| size_bound(v, limit()));
        let lines = match a.first().and_then(Value::as_str) {
            Some(s) => s.matches('\n').count() as u128 + 1,
            None => s_len + 1,
        };
        check("indent", s_len.saturating_add(lines.saturating_mul(width)))
    });
    wrap(env, "replace", minijinja::filters::replace, |a, _| {
        let value = a.first();
        let s_len = value.map_or(0, |v| size_bound(v, limit()));
        let to = a.get(2).map_or(0, |v| size_bound(v, limit()));
        let from = a.get(1).and_then(Value::as_str);
        check(
            "replace",
            replaced_len(s_len, from, value.and_then(Value::as_str), to),
        )
    });
    wrap(env, "join", minijinja::filters::join, |a, k| {
        let items = a.first().map_or(0, |v| size_bound(v, limit()));
        check("join", items)?;
        let n = a.first().and_then(Value::len).unwrap_or(0) as u128;
        let sep = a
            .get(1)
            .cloned()
            .or_else(|| kwarg(k, "d"))
            .map_or(0, |v| size_bound(&v, limit()));
        check("join", items.saturating_add(n.saturating_mul(sep)))
    });
    wrap(env, "format", minijinja::filters::format, |a, _| {
        let width = a.first().and_then(Value::as_str).map_or(0, widest);
        let args = a
            .iter()
            .skip(1)
            .fold(0u128, |sum, v| sum.saturating_add(size_bound(v, limit())));
        check(
            "format",
            width
                .max(a.first().map_or(0, |v| size_bound(v, limit())))
                .saturating_add(args),
        )
    });
    wrap(env, "tojson", minijinja::filters::tojson, |a, k| {
        let indent = as_count(a.get(1).filter(|v| v.kind() == ValueKind::Number).cloned())
            .or_else(|| as_count(kwarg(k, "indent")))
            .unwrap_or(0);
        if indent > 64 {
            return check("tojson", u128::MAX);
        }
        let size = a.first().map_or(0, |v| size_bound(v, limit()));
        check("tojson", size.saturating_mul(6 + indent))
    });
    wrap(env, "pprint", minijinja::filters::pprint, |a, _| {
        let size = a.first().map_or(0, |v| size_bound(v, limit()));
        check("pprint", size.saturating_mul(6))
    });
}

/// pycompat's string methods, with the growing ones checked first.
pub(super) fn method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if let Some(s) = value.as_str() {
        match method {
            "replace" => {
                let from = args.first().and_then(Value::as_str);
                let to = args.get(1).map_or(0, |v| size_bound(v, limit()));
                check(".replace", replaced_len(s.len() as u128, from, Some(s), to))?;
            }
            "join" => {
                let items = args.first().map_or(0, |v| size_bound(v, limit()));
                check(".join", items)?;
                let n = args.first().and_then(Value::len).unwrap_or(0) as u128;
                check(
                    ".join",
                    items.saturating_add(n.saturating_mul(s.len() as u128)),
                )?;
            }
            "format" => {
                let args = args
                    .iter()
                    .fold(0u128, |sum, v| sum.saturating_add(size_bound(v, limit())));
                check(
                    ".format",
                    widest(s).max(s.len() as u128).saturating_add(args),
                )?;
            }
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}
