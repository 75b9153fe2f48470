//! The builtins whose result can be far larger than their inputs, checked before they run.
//!
//! Fuel bounds how many instructions a render executes, not how many bytes one instruction
//! allocates: `"a\nb"|indent(10000000000)` asks for 10 GB in one call, and a failed allocation
//! aborts the process (the tab, in a browser). Each filter and string method below first bounds
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
//! Not covered (see tests/hostile/unbounded/): strings grown by `~` or `+` and lists by `+`
//! inside the fuel budget (doubling a namespace attribute 40 times, or accumulating a long
//! string one piece at a time in nested loops): minijinja charges those operators one unit of
//! fuel whatever the bytes they copy, and fuselm cannot hook them.

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

fn len_of(v: &Value) -> u128 {
    v.as_str().map_or(0, |s| s.len() as u128)
}

/// A keyword argument, without marking it used (the builtin reads it again).
fn kwarg(kwargs: &Kwargs, key: &str) -> Option<Value> {
    kwargs
        .peek::<Option<Value>>(key)
        .ok()
        .flatten()
        .filter(|v| !v.is_undefined())
}

fn as_count(v: Option<Value>) -> Option<u128> {
    v.and_then(|v| i128::try_from(v).ok())
        .map(|n| n.max(0) as u128)
}

/// Upper bound of `s.replace(from, to)`.
fn replaced_len(s: &str, from: &str, to: &str) -> u128 {
    let matches = if from.is_empty() {
        s.chars().count() as u128 + 1
    } else {
        s.matches(from).count() as u128
    };
    s.len() as u128 + matches * to.len() as u128
}

/// The largest number written in a format string (a width or precision asks for that many
/// bytes).
fn widest(format: &str) -> u128 {
    format
        .split(|c: char| !c.is_ascii_digit())
        .filter(|digits| !digits.is_empty())
        .map(|digits| digits.parse::<u128>().unwrap_or(u128::MAX))
        .max()
        .unwrap_or(0)
}

fn items(v: &Value) -> u128 {
    v.len().map_or(0, |n| n as u128)
}

/// `name` now checks `bound` on its arguments first, then runs the builtin that had the name.
fn wrap(
    env: &mut Environment<'static>,
    name: &'static str,
    hidden: &'static str,
    bound: fn(&[Value], &Kwargs) -> Result<(), Error>,
) {
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
            state.apply_filter(hidden, &args)
        },
    );
}

/// Installs the checked filters in `env` (after its builtins).
pub(super) fn install(env: &mut Environment<'static>) {
    env.add_filter("__fuselm_indent", minijinja::filters::indent);
    env.add_filter("__fuselm_replace", minijinja::filters::replace);
    env.add_filter("__fuselm_join", minijinja::filters::join);
    env.add_filter("__fuselm_format", minijinja::filters::format);
    env.add_filter("__fuselm_tojson", minijinja::filters::tojson);
    env.add_filter("__fuselm_pprint", minijinja::filters::pprint);
    wrap(env, "indent", "__fuselm_indent", |a, k| {
        let width = as_count(a.get(1).filter(|v| v.kind() == ValueKind::Number).cloned())
            .or_else(|| as_count(kwarg(k, "width")))
            .unwrap_or(4);
        let s = a.first().and_then(Value::as_str).unwrap_or_default();
        let lines = s.matches('\n').count() as u128 + 1;
        check("indent", s.len() as u128 + lines * width)
    });
    wrap(env, "replace", "__fuselm_replace", |a, _| {
        let s = a.first().and_then(Value::as_str).unwrap_or_default();
        let from = a.get(1).and_then(Value::as_str).unwrap_or_default();
        let to = a.get(2).and_then(Value::as_str).unwrap_or_default();
        check("replace", replaced_len(s, from, to))
    });
    wrap(env, "join", "__fuselm_join", |a, _| {
        let n = a.first().map(items).unwrap_or(0);
        check("join", n)?;
        check("join", n * a.get(1).map(len_of).unwrap_or(0))
    });
    wrap(env, "format", "__fuselm_format", |a, _| {
        let width = a.first().and_then(Value::as_str).map(widest).unwrap_or(0);
        check("format", width)
    });
    wrap(env, "tojson", "__fuselm_tojson", |a, k| {
        let indent = as_count(a.get(1).filter(|v| v.kind() == ValueKind::Number).cloned())
            .or_else(|| as_count(kwarg(k, "indent")))
            .unwrap_or(0);
        if indent > 64 {
            return check("tojson", u128::MAX);
        }
        check("tojson", a.first().map(items).unwrap_or(0))
    });
    wrap(env, "pprint", "__fuselm_pprint", |a, _| {
        check("pprint", a.first().map(items).unwrap_or(0))
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
                let from = args.first().and_then(Value::as_str).unwrap_or_default();
                let to = args.get(1).and_then(Value::as_str).unwrap_or_default();
                check(".replace", replaced_len(s, from, to))?;
            }
            "join" => {
                let n = args.first().map(items).unwrap_or(0);
                check(".join", n)?;
                check(".join", n * s.len() as u128)?;
            }
            "format" => check(".format", widest(s))?,
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}
