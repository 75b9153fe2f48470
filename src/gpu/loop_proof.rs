//! A machine-checked proof that every loop of a WGSL module terminates, so that
//! [`GpuContext::shader`](super::GpuContext::shader) may compile it without Naga's forced loop
//! bounding (which costs ~31% of the decode step on an H200; bench/NOTES.md).
//!
//! [`prove`] walks every loop of every function and entry point of a parsed [`naga::Module`]
//! and either proves it terminates or names the first loop it cannot prove and why. It accepts
//! only these forms, as Naga lowers WGSL's `for (init; cond; update)` and `while (cond)`: a
//! `Loop` whose body starts with `if cond {} else { break; }` (or `if !cond { break; }`), where
//! one conjunct of `cond` compares a *counter* — a function-local `u32` variable that no
//! statement of the body writes (no `Store` to it, no pointer to it passed to a call) and that
//! the continuing block stores exactly once, at its top level — and that store is one of:
//!
//! * `i = i + s` with `cond ⊇ x < B` (or `x <= B`), where `x` is `i`, `i + a`, `a + i` or
//!   `i - a` with `a` loop-invariant, `s ≥ 1`, `B` loop-invariant, and `max(B) + max(s) ≤ 2^32`
//!   (`≤ 2^32 - 1` for `<=`). Then `k = x` (mod 2^32) steps by `s` without wrapping while the
//!   loop runs, so it passes `B` after at most `max(B)` iterations, whatever `i` starts at.
//! * `i = i >> k` (`1 ≤ k ≤ 31`) or `i = i / c` (`c ≥ 2`) with `cond ⊇ i > 0` / `i != 0` /
//!   `i >= 1`: `i` strictly decreases while it is nonzero.
//! * `i = i << k` (`1 ≤ k ≤ 31`) with `cond ⊇ i < B` (or `<=`), `B` loop-invariant, the
//!   largest value that passes the test shifted by `max(k)` still below 2^32, and `i ≥ 1` on
//!   entry (stored just before the loop, or the variable's constant initializer when nothing
//!   else stores it): `i` at least doubles each iteration without overflowing.
//!
//! Extra exits (`break`, `return`, `break if`) only end a loop sooner, so they are allowed, and
//! so are atomics and barriers inside a counted loop: side effects never count as progress.
//!
//! `max`/`min` come from an interval analysis of `u32` expressions: literals and constants,
//! the entry point's builtins (workgroup size from `@workgroup_size`, workgroup counts from the
//! device's `maxComputeWorkgroupsPerDimension`), `arrayLength` (a binding is at most
//! `maxStorageBufferBindingSize` bytes), arithmetic that provably does not wrap, `min`/`max`/
//! `select`/`clamp`, every value a call site passes to a function argument, every value stored
//! to a local or workgroup variable, a counter read inside its own loop's body (below its
//! bound), and one assumption: **a `u32` read from a uniform buffer is below
//! [`PARAM_LIMIT`]** (2^31). The proof lists the uniform fields its range analysis read
//! ([`Proof::assumptions`], a superset of those it relied on); the host writes those parameters from shapes that the model loader
//! limits (`model::shared::check_fit` refuses shapes of 2^31 or more) and from sampler and
//! simulation settings below that, and tests/loop_proof.rs checks the list of fields.
//!
//! Loop-invariant means: not computed inside the loop, or computed there only from literals,
//! constants, arguments, `arrayLength`, loads from uniform or read-only storage buffers, and
//! loads of local variables that the loop writes only just before leaving it (a write
//! directly followed by `break` or `return`).
//!
//! Native only: in a browser, the browser's WGSL compiler applies its own checks.

use naga::{
    AddressSpace, BinaryOperator as Op, Block, BuiltIn, Expression as E, Function, Handle, Literal,
    MathFunction as Mf, Module, Scalar, Span, Statement as S, TypeInner,
};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The assumption the proof may use: every `u32` that a kernel reads from a uniform buffer is
/// below this (the host never writes a larger loop parameter; see the module docs).
pub const PARAM_LIMIT: u64 = super::LOOP_PARAM_LIMIT;

const MAX: u64 = u32::MAX as u64;
const TOP: (u64, u64) = (0, MAX);

/// The device limits the interval analysis uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProofLimits {
    /// `maxComputeWorkgroupsPerDimension`: bounds `workgroup_id`, `num_workgroups` and
    /// `global_invocation_id`.
    pub max_workgroups_per_dimension: u32,
    /// `maxStorageBufferBindingSize` in bytes: bounds `arrayLength`.
    pub max_storage_buffer_binding_size: u64,
}

impl ProofLimits {
    pub fn of(limits: &wgpu::Limits) -> Self {
        Self {
            max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
        }
    }

    /// The largest limits any device may report (u32 workgroup counts, 4 GiB bindings): a
    /// proof under these holds on every device.
    pub const WORST: Self = Self {
        max_workgroups_per_dimension: u32::MAX,
        max_storage_buffer_binding_size: 1 << 32,
    };
}

/// Every loop of the module terminates (under [`PARAM_LIMIT`] for the listed fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proof {
    /// How many loops were proved.
    pub loops: usize,
    /// The uniform fields (`global.member`) whose values the proof assumed below
    /// [`PARAM_LIMIT`].
    pub assumptions: BTreeSet<String>,
}

/// A loop the prover could not prove terminates.
#[derive(Debug, Clone, PartialEq)]
pub struct Unproven {
    /// The function or entry point that holds the loop.
    pub function: String,
    /// The loop's position among the function's loops (0-based, in source order).
    pub index: usize,
    /// The loop statement's span (see [`Unproven::line`]).
    pub span: Span,
    /// Why not.
    pub reason: String,
}

impl Unproven {
    /// The 1-based line of the loop in `source` (the WGSL the module was parsed from).
    pub fn line(&self, source: &str) -> Option<u32> {
        self.span
            .is_defined()
            .then(|| self.span.location(source).line_number)
    }

    /// The reason with the function, the loop and (given the source) its line.
    pub fn describe(&self, source: Option<&str>) -> String {
        let line = source
            .and_then(|s| self.line(s))
            .map(|l| format!(" (line {l})"))
            .unwrap_or_default();
        format!(
            "function `{}`, loop {}{line}: {}",
            self.function, self.index, self.reason
        )
    }
}

impl std::fmt::Display for Unproven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe(None))
    }
}

/// Parses `source` and [`prove`]s it; a parse error is returned as an [`Unproven`] of the
/// function "(module)".
pub fn prove_wgsl(source: &str, limits: &ProofLimits) -> Result<Proof, Unproven> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| Unproven {
        function: "(module)".into(),
        index: 0,
        span: Span::UNDEFINED,
        reason: format!("parse error: {}", e.emit_to_string(source)),
    })?;
    prove(&module, limits)
}

/// Proves that every loop of every function and entry point of `module` terminates, or names
/// the first loop it cannot prove.
pub fn prove(module: &Module, limits: &ProofLimits) -> Result<Proof, Unproven> {
    let prover = Prover::new(module, *limits);
    let mut proof = Proof::default();
    for key in prover.keys() {
        let func = prover.func(key);
        let mut index = 0;
        prover.block(key, &func.body, &mut index)?;
        proof.loops += index;
    }
    proof.assumptions = prover.assumptions.into_inner();
    Ok(proof)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Fn(Handle<Function>),
    Entry(usize),
}

/// One side of a loop test that must hold for the loop to go on.
#[derive(Debug, Clone, Copy)]
struct Atom {
    op: Op,
    left: Handle<E>,
    right: Handle<E>,
}

/// `if condition { t = value; } else { t = otherwise; }` (Naga's lowering of `&&`/`||`).
struct Short {
    var: Handle<naga::LocalVariable>,
    condition: Handle<E>,
    value: Handle<E>,
    otherwise: bool,
}

fn short_circuit(
    func: &Function,
    condition: Handle<E>,
    accept: &Block,
    reject: &Block,
) -> Option<Short> {
    let store = |s: &S| match *s {
        S::Store { pointer, value } => match func.expressions[pointer] {
            E::LocalVariable(v) if func.local_variables[v].name.is_none() => Some((v, value)),
            _ => None,
        },
        _ => None,
    };
    let mut stmts: Vec<&S> = accept.iter().collect();
    let (var, value) = store(stmts.pop()?)?;
    if !stmts.iter().all(|s| matches!(s, S::Emit(_))) || reject.len() != 1 {
        return None;
    }
    let (other, lit) = store(reject.iter().next()?)?;
    let E::Literal(Literal::Bool(otherwise)) = func.expressions[lit] else {
        return None;
    };
    (other == var).then_some(Short {
        var,
        condition,
        value,
        otherwise,
    })
}

/// What a loop's body learns about a counter that the body does not write: every load of it in
/// the body is `< bound` (`<= bound` with `inclusive`).
struct Fact {
    var: Handle<naga::LocalVariable>,
    body: HashSet<Handle<E>>,
    bound: Handle<E>,
    inclusive: bool,
}

/// A call: the calling function and its arguments.
type CallSite = (Key, Vec<Handle<E>>);
/// `[lo, hi]`.
type Interval = (u64, u64);

struct Prover<'a> {
    module: &'a Module,
    limits: ProofLimits,
    /// Per function: the counter facts of its loops.
    facts: HashMap<Key, Vec<Fact>>,
    /// Per function: its call sites (caller, arguments).
    callers: HashMap<Handle<Function>, Vec<CallSite>>,
    memo: RefCell<HashMap<(Key, Handle<E>), Interval>>,
    globals_memo: RefCell<HashMap<Handle<naga::GlobalVariable>, (u64, u64)>>,
    assumptions: RefCell<BTreeSet<String>>,
}

/// Walks every statement of `block` (nested blocks included).
fn each_statement<'b>(block: &'b Block, f: &mut impl FnMut(&'b S, Span)) {
    for (stmt, span) in block.span_iter() {
        f(stmt, *span);
        match stmt {
            S::Block(b) => each_statement(b, f),
            S::If { accept, reject, .. } => {
                each_statement(accept, f);
                each_statement(reject, f);
            }
            S::Switch { cases, .. } => {
                for c in cases {
                    each_statement(&c.body, f);
                }
            }
            S::Loop {
                body, continuing, ..
            } => {
                each_statement(body, f);
                each_statement(continuing, f);
            }
            _ => {}
        }
    }
}

/// The expressions a block computes: its `Emit` ranges and the results of its statements.
fn computed_in(block: &Block) -> HashSet<Handle<E>> {
    let mut set = HashSet::new();
    each_statement(block, &mut |stmt, _| match stmt {
        S::Emit(range) => set.extend(range.clone()),
        S::Call {
            result: Some(r), ..
        }
        | S::Atomic {
            result: Some(r), ..
        }
        | S::WorkGroupUniformLoad { result: r, .. }
        | S::SubgroupBallot { result: r, .. }
        | S::SubgroupGather { result: r, .. }
        | S::SubgroupCollectiveOperation { result: r, .. } => {
            set.insert(*r);
        }
        _ => {}
    });
    set
}

/// The variable at the root of a pointer expression (through `Access`/`AccessIndex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    Local(Handle<naga::LocalVariable>),
    Global(Handle<naga::GlobalVariable>),
    Other,
}

fn root(func: &Function, mut e: Handle<E>) -> Root {
    loop {
        match func.expressions[e] {
            E::Access { base, .. } | E::AccessIndex { base, .. } => e = base,
            E::LocalVariable(v) => return Root::Local(v),
            E::GlobalVariable(g) => return Root::Global(g),
            _ => return Root::Other,
        }
    }
}

/// A write to memory a statement makes: (pointer, whether it stores a whole variable through
/// exactly this pointer with `Store`, the stored value).
fn writes(stmt: &S) -> Vec<(Handle<E>, Option<Handle<E>>)> {
    match stmt {
        S::Store { pointer, value } => vec![(*pointer, Some(*value))],
        S::Atomic { pointer, .. } => vec![(*pointer, None)],
        // A call may write through any pointer it is passed.
        S::Call { arguments, .. } => arguments.iter().map(|a| (*a, None)).collect(),
        S::CooperativeStore { target, .. } => vec![(*target, None)],
        _ => vec![],
    }
}

/// Whether any statement of `block` writes local `var`, skipping the top-level statement at
/// `skip`; the reason if so.
fn writes_local(
    func: &Function,
    block: &Block,
    var: Handle<naga::LocalVariable>,
    skip: Option<usize>,
) -> Option<&'static str> {
    let mut found = None;
    for (i, stmt) in block.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let mut one = Block::new();
        one.push(stmt.clone(), Span::UNDEFINED);
        each_statement(&one, &mut |s, _| {
            for (p, _) in writes(s) {
                if root(func, p) == Root::Local(var) && found.is_none() {
                    found = Some(match s {
                        S::Store { .. } => "the loop's body stores to its counter",
                        S::Call { .. } => "the loop passes a pointer to its counter to a call",
                        _ => "the loop writes its counter",
                    });
                }
            }
            if matches!(s, S::RayQuery { .. } | S::RayPipelineFunction(_)) && found.is_none() {
                found = Some("the loop has a ray-query statement");
            }
        });
    }
    found
}

/// Whether `block` (a loop's body or continuing block) may write local `var` and then reach the
/// loop's test again: a write directly followed by a `break` of this loop (not of a nested loop
/// or `switch`) or a `return` never does.
fn writes_then_tests(
    func: &Function,
    block: &Block,
    var: Handle<naga::LocalVariable>,
    nested: bool,
) -> bool {
    let stmts: Vec<&S> = block.iter().collect();
    for (i, stmt) in stmts.iter().enumerate() {
        let hit = match stmt {
            S::Block(b) => writes_then_tests(func, b, var, nested),
            S::If { accept, reject, .. } => {
                writes_then_tests(func, accept, var, nested)
                    || writes_then_tests(func, reject, var, nested)
            }
            S::Switch { cases, .. } => cases
                .iter()
                .any(|c| writes_then_tests(func, &c.body, var, true)),
            S::Loop {
                body, continuing, ..
            } => {
                writes_then_tests(func, body, var, true)
                    || writes_then_tests(func, continuing, var, true)
            }
            _ => {
                writes(stmt)
                    .iter()
                    .any(|(p, _)| root(func, *p) == Root::Local(var))
                    && {
                        let next = stmts[i + 1..].iter().find(|s| !matches!(s, S::Emit(_)));
                        !matches!(next, Some(S::Return { .. }))
                            && (nested || !matches!(next, Some(S::Break)))
                    }
            }
        };
        if hit {
            return true;
        }
    }
    false
}

fn sat_add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

impl<'a> Prover<'a> {
    fn new(module: &'a Module, limits: ProofLimits) -> Self {
        let mut p = Self {
            module,
            limits,
            facts: HashMap::new(),
            callers: HashMap::new(),
            memo: RefCell::new(HashMap::new()),
            globals_memo: RefCell::new(HashMap::new()),
            assumptions: RefCell::new(BTreeSet::new()),
        };
        for key in p.keys() {
            let func = p.func(key);
            let mut facts = Vec::new();
            each_statement(&func.body, &mut |stmt, _| {
                if let S::Call {
                    function,
                    arguments,
                    ..
                } = stmt
                {
                    p.callers
                        .entry(*function)
                        .or_default()
                        .push((key, arguments.clone()));
                }
                if let S::Loop { body, .. } = stmt {
                    if let Some(fact) = p.fact(func, body) {
                        facts.push(fact);
                    }
                }
            });
            p.facts.insert(key, facts);
        }
        p
    }

    fn keys(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .module
            .functions
            .iter()
            .map(|(h, _)| Key::Fn(h))
            .collect();
        keys.extend((0..self.module.entry_points.len()).map(Key::Entry));
        keys
    }

    fn func(&self, key: Key) -> &'a Function {
        match key {
            Key::Fn(h) => &self.module.functions[h],
            Key::Entry(i) => &self.module.entry_points[i].function,
        }
    }

    fn name(&self, key: Key) -> String {
        match key {
            Key::Fn(h) => self.module.functions[h].name.clone(),
            Key::Entry(i) => Some(self.module.entry_points[i].name.clone()),
        }
        .unwrap_or_else(|| "(unnamed)".into())
    }

    /// The loop's test: the `If` that starts its body (after the `Emit`s and the `if`s by
    /// which Naga lowers a short-circuit `&&`/`||` in it), as the comparisons that must all
    /// hold for the loop to go on.
    fn header(&self, func: &Function, body: &Block) -> Option<Vec<Atom>> {
        let is_break = |b: &Block| b.len() == 1 && matches!(b.iter().next(), Some(S::Break));
        let mut shorts = Vec::new();
        for stmt in body.iter() {
            let S::If {
                condition,
                accept,
                reject,
            } = stmt
            else {
                if matches!(stmt, S::Emit(_)) {
                    continue;
                }
                return None;
            };
            let negated = if accept.is_empty() && is_break(reject) {
                false
            } else if is_break(accept) && reject.is_empty() {
                true
            } else {
                shorts.push(short_circuit(func, *condition, accept, reject)?);
                continue;
            };
            let mut atoms = Vec::new();
            self.atoms(func, *condition, negated, &shorts, &mut atoms);
            return Some(atoms);
        }
        None
    }

    /// The comparisons that must all hold when `e` is true (false with `negated`).
    fn atoms(
        &self,
        func: &Function,
        e: Handle<E>,
        negated: bool,
        shorts: &[Short],
        out: &mut Vec<Atom>,
    ) {
        match func.expressions[e] {
            E::Unary {
                op: naga::UnaryOperator::LogicalNot,
                expr,
            } => self.atoms(func, expr, !negated, shorts, out),
            // `a && b` as Naga lowers it: `t = b` if `a`, else `t = false`. For `t` to be true
            // (`!negated`), `a` and `b` hold (`||`: `!a` and `!b` for `t` false).
            E::Load { pointer } => {
                if let E::LocalVariable(t) = func.expressions[pointer] {
                    if let Some(sc) = shorts.iter().rev().find(|sc| sc.var == t) {
                        if sc.otherwise == negated {
                            self.atoms(func, sc.condition, false, shorts, out);
                            self.atoms(func, sc.value, negated, shorts, out);
                        }
                    }
                }
            }
            E::Binary { op, left, right } => match (op, negated) {
                (Op::LogicalAnd, false) | (Op::LogicalOr, true) => {
                    self.atoms(func, left, negated, shorts, out);
                    self.atoms(func, right, negated, shorts, out);
                }
                (Op::Less | Op::LessEqual | Op::Greater | Op::GreaterEqual, _)
                | (Op::Equal | Op::NotEqual, _) => {
                    let op = if negated {
                        match op {
                            Op::Less => Op::GreaterEqual,
                            Op::LessEqual => Op::Greater,
                            Op::Greater => Op::LessEqual,
                            Op::GreaterEqual => Op::Less,
                            Op::Equal => Op::NotEqual,
                            _ => Op::Equal,
                        }
                    } else {
                        op
                    };
                    out.push(Atom { op, left, right });
                    // And the mirrored form, so callers only match the counter on the left.
                    let mirrored = match op {
                        Op::Less => Op::Greater,
                        Op::LessEqual => Op::GreaterEqual,
                        Op::Greater => Op::Less,
                        Op::GreaterEqual => Op::LessEqual,
                        other => other,
                    };
                    out.push(Atom {
                        op: mirrored,
                        left: right,
                        right: left,
                    });
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// `Load` of a local `u32` variable: the variable.
    fn load_of(&self, func: &Function, e: Handle<E>) -> Option<Handle<naga::LocalVariable>> {
        let E::Load { pointer } = func.expressions[e] else {
            return None;
        };
        let E::LocalVariable(v) = func.expressions[pointer] else {
            return None;
        };
        let ty = &self.module.types[func.local_variables[v].ty].inner;
        (*ty == TypeInner::Scalar(Scalar::U32)).then_some(v)
    }

    /// A counter fact for the loop with this body, if its test bounds a counter directly.
    fn fact(&self, func: &Function, body: &Block) -> Option<Fact> {
        let atoms = self.header(func, body)?;
        let inside = computed_in(body);
        atoms.iter().find_map(|a| {
            let inclusive = match a.op {
                Op::Less => false,
                Op::LessEqual => true,
                _ => return None,
            };
            let var = self.load_of(func, a.left)?;
            if !inside.contains(&a.left) || writes_local(func, body, var, None).is_some() {
                return None;
            }
            Some(Fact {
                var,
                body: inside.clone(),
                bound: a.right,
                inclusive,
            })
        })
    }

    /// Proves every loop in `block`, counting them in `index`.
    fn block(&self, key: Key, block: &Block, index: &mut usize) -> Result<(), Unproven> {
        let func = self.func(key);
        let stmts: Vec<(&S, &Span)> = block.span_iter().collect();
        for (i, (stmt, span)) in stmts.iter().enumerate() {
            match stmt {
                S::Loop {
                    body, continuing, ..
                } => {
                    let this = *index;
                    *index += 1;
                    // The store just before the loop (for `for (var i = init; ..)`).
                    let before = stmts[..i]
                        .iter()
                        .rev()
                        .find(|(s, _)| !matches!(s, S::Emit(_)))
                        .and_then(|(s, _)| match s {
                            S::Store { pointer, value } => Some((*pointer, *value)),
                            _ => None,
                        });
                    self.prove_loop(key, body, continuing, before)
                        .map_err(|reason| Unproven {
                            function: self.name(key),
                            index: this,
                            span: **span,
                            reason,
                        })?;
                    self.block(key, body, index)?;
                    self.block(key, continuing, index)?;
                }
                S::Block(b) => self.block(key, b, index)?,
                S::If { accept, reject, .. } => {
                    self.block(key, accept, index)?;
                    self.block(key, reject, index)?;
                }
                S::Switch { cases, .. } => {
                    for c in cases {
                        self.block(key, &c.body, index)?;
                    }
                }
                _ => {}
            }
        }
        let _ = func;
        Ok(())
    }

    fn prove_loop(
        &self,
        key: Key,
        body: &Block,
        continuing: &Block,
        before: Option<(Handle<E>, Handle<E>)>,
    ) -> Result<(), String> {
        let func = self.func(key);
        let atoms = self.header(func, body).ok_or_else(|| {
            "the loop does not start with its test (`if cond {} else { break; }`): \
             an unbounded `loop` or a `for`/`while` without a condition"
                .to_string()
        })?;
        let body_in = computed_in(body);
        let cont_in = computed_in(continuing);
        let mut inside = body_in.clone();
        inside.extend(cont_in.iter().copied());
        let mut reasons = Vec::new();
        for atom in &atoms {
            match self.prove_atom(
                key, atom, body, continuing, &body_in, &cont_in, &inside, before,
            ) {
                Ok(()) => return Ok(()),
                Err(Some(r)) => reasons.push(r),
                Err(None) => {}
            }
        }
        Err(if reasons.is_empty() {
            "no conjunct of the loop's test compares a function-local u32 counter \
             (`i < B`, `i <= B`, `i > 0u`, `i != 0u`)"
                .into()
        } else {
            reasons.join("; ")
        })
    }

    /// Proves the loop ends through `atom`. `Err(None)`: the atom does not name a counter.
    #[allow(clippy::too_many_arguments)]
    fn prove_atom(
        &self,
        key: Key,
        atom: &Atom,
        body: &Block,
        continuing: &Block,
        body_in: &HashSet<Handle<E>>,
        cont_in: &HashSet<Handle<E>>,
        inside: &HashSet<Handle<E>>,
        before: Option<(Handle<E>, Handle<E>)>,
    ) -> Result<(), Option<String>> {
        let func = self.func(key);
        // The counter: `i`, `i + a`, `a + i` or `i - a` (the offset only for `<`/`<=`).
        let (var, load, offset) = if let Some(v) = self.load_of(func, atom.left) {
            (v, atom.left, None)
        } else if let E::Binary { op, left, right } = func.expressions[atom.left] {
            match (op, self.load_of(func, left), self.load_of(func, right)) {
                (Op::Add | Op::Subtract, Some(v), _) => (v, left, Some(right)),
                (Op::Add, None, Some(v)) => (v, right, Some(left)),
                _ => return Err(None),
            }
        } else {
            return Err(None);
        };
        let vname = func.local_variables[var]
            .name
            .clone()
            .unwrap_or_else(|| "counter".into());
        if !body_in.contains(&load) {
            return Err(Some(format!(
                "the test reads `{vname}` before the loop, not each iteration"
            )));
        }
        if let Some(why) = writes_local(func, body, var, None) {
            return Err(Some(format!("{why} (`{vname}`)")));
        }
        // The continuing block: exactly one top-level `Store` of the whole counter.
        let stores: Vec<(usize, Handle<E>)> = continuing
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                S::Store { pointer, value }
                    if matches!(func.expressions[*pointer], E::LocalVariable(v) if v == var) =>
                {
                    Some((i, *value))
                }
                _ => None,
            })
            .collect();
        let [(at, value)] = stores[..] else {
            return Err(Some(format!(
                "the continuing block does not update `{vname}` exactly once"
            )));
        };
        if let Some(why) = writes_local(func, continuing, var, Some(at)) {
            return Err(Some(format!("{why} (`{vname}`, in the continuing block)")));
        }
        let E::Binary {
            op: step_op,
            left,
            right,
        } = func.expressions[value]
        else {
            return Err(Some(format!(
                "`{vname}` is not updated by an arithmetic step"
            )));
        };
        let own = |e: Handle<E>| self.load_of(func, e) == Some(var) && cont_in.contains(&e);
        let pow = 1u64 << 32;
        let inv = |e| self.invariant(key, e, inside, body, continuing);
        match (atom.op, step_op) {
            (Op::Less | Op::LessEqual, Op::Add) => {
                let step = if own(left) {
                    right
                } else if own(right) {
                    left
                } else {
                    return Err(Some(format!(
                        "`{vname}` is not updated as `{vname} + step`"
                    )));
                };
                let (slo, shi) = self.range(key, step);
                if slo < 1 {
                    return Err(Some(format!("the step of `{vname}` may be 0")));
                }
                if let Some(a) = offset {
                    if !inv(a) {
                        return Err(Some(format!(
                            "the offset added to `{vname}` in the test may change in the loop"
                        )));
                    }
                }
                if !inv(atom.right) {
                    return Err(Some(format!(
                        "the bound of `{vname}` may change in the loop"
                    )));
                }
                // `i < B` with step 1 can never wrap (i + 1 <= B <= 2^32 - 1).
                if atom.op == Op::Less && slo == 1 && shi == 1 {
                    return Ok(());
                }
                let (_, bhi) = self.range(key, atom.right);
                let room = if atom.op == Op::Less { pow } else { pow - 1 };
                if bhi + shi > room {
                    return Err(Some(format!(
                        "`{vname}` may wrap around: its bound may reach {bhi} and its step {shi}"
                    )));
                }
                Ok(())
            }
            (Op::Less | Op::LessEqual, Op::ShiftLeft) if offset.is_none() => {
                if !own(left) {
                    return Err(Some(format!("`{vname}` is not updated as `{vname} << k`")));
                }
                let (klo, khi) = self.range(key, right);
                if klo < 1 || khi > 31 {
                    return Err(Some(format!("the shift of `{vname}` may be 0 or over 31")));
                }
                if !inv(atom.right) {
                    return Err(Some(format!(
                        "the bound of `{vname}` may change in the loop"
                    )));
                }
                let (_, bhi) = self.range(key, atom.right);
                let top = if atom.op == Op::Less {
                    bhi.saturating_sub(1)
                } else {
                    bhi
                };
                if (top << khi) > MAX {
                    return Err(Some(format!(
                        "`{vname} << {khi}` may overflow below its bound {bhi}"
                    )));
                }
                let entry = match before {
                    Some((p, v)) if matches!(func.expressions[p], E::LocalVariable(x) if x == var) => {
                        self.range(key, v).0
                    }
                    _ => {
                        // Only the update stores it: it holds its initializer or a value the
                        // update made from one at least 1 (a shift without overflow).
                        let mut stores = 0;
                        each_statement(&func.body, &mut |s, _| {
                            for (p, _) in writes(s) {
                                if root(func, p) == Root::Local(var) {
                                    stores += 1;
                                }
                            }
                        });
                        match func.local_variables[var].init {
                            Some(init) if stores == 1 => self.range(key, init).0,
                            _ => 0,
                        }
                    }
                };
                if entry < 1 {
                    return Err(Some(format!("`{vname}` may be 0 when the loop starts")));
                }
                Ok(())
            }
            (Op::Greater | Op::NotEqual | Op::GreaterEqual, Op::ShiftRight | Op::Divide)
                if offset.is_none() =>
            {
                let zero = match atom.op {
                    Op::GreaterEqual => 1,
                    _ => 0,
                };
                if self.range(key, atom.right) != (zero, zero) {
                    return Err(Some(format!(
                        "`{vname}` counts down but its test is not `{vname} > 0u`"
                    )));
                }
                if !own(left) {
                    return Err(Some(format!("`{vname}` is not updated as `{vname} >> k`")));
                }
                let (lo, hi) = self.range(key, right);
                let ok = match step_op {
                    Op::ShiftRight => lo >= 1 && hi <= 31,
                    _ => lo >= 2,
                };
                if !ok {
                    return Err(Some(format!("the update of `{vname}` may not decrease it")));
                }
                Ok(())
            }
            _ => Err(Some(format!(
                "`{vname}`'s test and update do not match a counted form"
            ))),
        }
    }

    /// Whether `e` has the same value on every iteration of the loop that computes `inside`.
    fn invariant(
        &self,
        key: Key,
        e: Handle<E>,
        inside: &HashSet<Handle<E>>,
        body: &Block,
        continuing: &Block,
    ) -> bool {
        if !inside.contains(&e) {
            return true;
        }
        let func = self.func(key);
        let inv = |x| self.invariant(key, x, inside, body, continuing);
        match func.expressions[e] {
            E::Literal(_)
            | E::Constant(_)
            | E::ZeroValue(_)
            | E::FunctionArgument(_)
            | E::GlobalVariable(_)
            | E::LocalVariable(_) => true,
            E::Load { pointer } => {
                let indices_ok = {
                    let mut p = pointer;
                    let mut ok = true;
                    loop {
                        match func.expressions[p] {
                            E::Access { base, index } => {
                                ok &= inv(index);
                                p = base;
                            }
                            E::AccessIndex { base, .. } => p = base,
                            _ => break,
                        }
                    }
                    ok
                };
                indices_ok
                    && match root(func, pointer) {
                        Root::Global(g) => match self.module.global_variables[g].space {
                            AddressSpace::Uniform | AddressSpace::Handle => true,
                            AddressSpace::Storage { access } => {
                                !access.contains(naga::StorageAccess::STORE)
                                    && !access.contains(naga::StorageAccess::ATOMIC)
                            }
                            _ => false,
                        },
                        Root::Local(v) => {
                            !writes_then_tests(func, body, v, false)
                                && !writes_then_tests(func, continuing, v, false)
                        }
                        Root::Other => false,
                    }
            }
            E::ArrayLength(p) => inv(p),
            E::Access { base, index } => inv(base) && inv(index),
            E::AccessIndex { base, .. } => inv(base),
            E::Splat { value, .. } => inv(value),
            E::Swizzle { vector, .. } => inv(vector),
            E::Unary { expr, .. } => inv(expr),
            E::As { expr, .. } => inv(expr),
            E::Binary { left, right, .. } => inv(left) && inv(right),
            E::Select {
                condition,
                accept,
                reject,
            } => inv(condition) && inv(accept) && inv(reject),
            E::Math {
                arg,
                arg1,
                arg2,
                arg3,
                ..
            } => [Some(arg), arg1, arg2, arg3].into_iter().flatten().all(inv),
            E::Compose { ref components, .. } => components.iter().all(|c| inv(*c)),
            _ => false,
        }
    }

    /// Bounds `[lo, hi]` of the u32 values `e` may take (`[0, u32::MAX]` when unknown).
    fn range(&self, key: Key, e: Handle<E>) -> (u64, u64) {
        if let Some(r) = self.memo.borrow().get(&(key, e)) {
            return *r;
        }
        // Placeholder for a cycle (a variable stored from itself): unknown.
        self.memo.borrow_mut().insert((key, e), TOP);
        let r = self.compute_range(key, e);
        let r = (r.0.min(MAX), r.1.min(MAX));
        self.memo.borrow_mut().insert((key, e), r);
        r
    }

    fn compute_range(&self, key: Key, e: Handle<E>) -> (u64, u64) {
        let func = self.func(key);
        let r = |x| self.range(key, x);
        match func.expressions[e] {
            E::Literal(l) => literal(l),
            E::Constant(c) => self.global_range(self.module.constants[c].init),
            E::ZeroValue(_) => (0, 0),
            E::Compose { ref components, .. } => union(components.iter().map(|c| r(*c))),
            E::Splat { value, .. } => r(value),
            E::Swizzle { vector, .. } => r(vector),
            E::AccessIndex { base, index } => {
                if let Some(b) = self.builtin(key, e) {
                    return self.builtin_range(key, b);
                }
                match func.expressions[base] {
                    E::Compose { ref components, .. } => {
                        components.get(index as usize).map(|c| r(*c)).unwrap_or(TOP)
                    }
                    _ => r(base),
                }
            }
            E::FunctionArgument(i) => {
                if let Some(b) = self.builtin(key, e) {
                    return self.builtin_range(key, b);
                }
                match key {
                    Key::Fn(f) => match self.callers.get(&f) {
                        Some(sites) if !sites.is_empty() => union(
                            sites
                                .iter()
                                .map(|(k, args)| self.range(*k, args[i as usize])),
                        ),
                        _ => TOP,
                    },
                    Key::Entry(_) => TOP,
                }
            }
            E::Load { pointer } => self.load_range(key, e, pointer),
            E::WorkGroupUniformLoadResult { .. } => {
                let mut found = TOP;
                each_statement(&func.body, &mut |s, _| {
                    if let S::WorkGroupUniformLoad { pointer, result } = s {
                        if *result == e {
                            if let Root::Global(g) = root(func, *pointer) {
                                if matches!(func.expressions[*pointer], E::GlobalVariable(_)) {
                                    found = self.global_var_range(g);
                                }
                            }
                        }
                    }
                });
                found
            }
            E::ArrayLength(p) => self.array_length_range(key, p),
            E::Unary { .. } => TOP,
            E::Binary { op, left, right } => binary(op, r(left), r(right)),
            E::Select { accept, reject, .. } => union([r(accept), r(reject)]),
            E::Math {
                fun,
                arg,
                arg1,
                arg2,
                ..
            } => {
                let a = r(arg);
                match (fun, arg1, arg2) {
                    (Mf::Min, Some(b), _) => {
                        let b = r(b);
                        (a.0.min(b.0), a.1.min(b.1))
                    }
                    (Mf::Max, Some(b), _) => {
                        let b = r(b);
                        (a.0.max(b.0), a.1.max(b.1))
                    }
                    (Mf::Clamp, Some(lo), Some(hi)) => {
                        let (lo, hi) = (r(lo), r(hi));
                        (a.0.max(lo.0).min(hi.0), a.1.max(lo.1).min(hi.1))
                    }
                    _ => TOP,
                }
            }
            _ => TOP,
        }
    }

    /// The bounds of a value of the module's constant expressions.
    fn global_range(&self, e: Handle<E>) -> (u64, u64) {
        match self.module.global_expressions[e] {
            E::Literal(l) => literal(l),
            E::Constant(c) => self.global_range(self.module.constants[c].init),
            E::ZeroValue(_) => (0, 0),
            E::Binary { op, left, right } => {
                binary(op, self.global_range(left), self.global_range(right))
            }
            E::Compose { ref components, .. } => {
                union(components.iter().map(|c| self.global_range(*c)))
            }
            E::Splat { value, .. } => self.global_range(value),
            _ => TOP,
        }
    }

    fn load_range(&self, key: Key, e: Handle<E>, pointer: Handle<E>) -> (u64, u64) {
        let func = self.func(key);
        match root(func, pointer) {
            Root::Global(g) => {
                let var = &self.module.global_variables[g];
                match var.space {
                    AddressSpace::Uniform => {
                        let mut path = var.name.clone().unwrap_or_default();
                        let mut chain = Vec::new();
                        let mut p = pointer;
                        loop {
                            match func.expressions[p] {
                                E::AccessIndex { base, index } => {
                                    chain.push(Some(index));
                                    p = base;
                                }
                                E::Access { base, .. } => {
                                    chain.push(None);
                                    p = base;
                                }
                                _ => break,
                            }
                        }
                        let mut ty = var.ty;
                        for index in chain.into_iter().rev() {
                            match (&self.module.types[ty].inner, index) {
                                (TypeInner::Struct { members, .. }, Some(i)) => {
                                    let m = &members[i as usize];
                                    path.push('.');
                                    path.push_str(m.name.as_deref().unwrap_or("?"));
                                    ty = m.ty;
                                }
                                (TypeInner::Array { base, .. }, _) => {
                                    path.push_str("[]");
                                    ty = *base;
                                }
                                _ => break,
                            }
                        }
                        self.assumptions.borrow_mut().insert(path);
                        (0, PARAM_LIMIT - 1)
                    }
                    AddressSpace::WorkGroup | AddressSpace::Private
                        if matches!(func.expressions[pointer], E::GlobalVariable(_)) =>
                    {
                        self.global_var_range(g)
                    }
                    _ => TOP,
                }
            }
            Root::Local(v) if matches!(func.expressions[pointer], E::LocalVariable(_)) => {
                // Inside its own loop's body, a counter is below that loop's bound.
                let mut best = None::<(u64, u64)>;
                for f in self.facts.get(&key).into_iter().flatten() {
                    if f.var == v && f.body.contains(&e) {
                        let (_, bhi) = self.range(key, f.bound);
                        let hi = if f.inclusive {
                            bhi
                        } else {
                            bhi.saturating_sub(1)
                        };
                        best = Some(match best {
                            Some((_, h)) => (0, h.min(hi)),
                            None => (0, hi),
                        });
                    }
                }
                let all = self.local_range(key, v);
                match best {
                    Some((_, hi)) => (all.0.min(hi), all.1.min(hi)),
                    None => all,
                }
            }
            _ => TOP,
        }
    }

    /// Every value local `v` may hold: its initializer and every value stored to it.
    fn local_range(&self, key: Key, v: Handle<naga::LocalVariable>) -> (u64, u64) {
        let func = self.func(key);
        let mut parts = vec![match func.local_variables[v].init {
            Some(init) => self.range(key, init),
            None => (0, 0),
        }];
        let mut unknown = false;
        each_statement(&func.body, &mut |s, _| {
            for (p, value) in writes(s) {
                if root(func, p) == Root::Local(v) {
                    match value {
                        Some(value) if matches!(func.expressions[p], E::LocalVariable(_)) => {
                            parts.push(self.range(key, value))
                        }
                        _ => unknown = true,
                    }
                }
            }
        });
        if unknown {
            TOP
        } else {
            union(parts)
        }
    }

    /// Every value a workgroup or private global scalar may hold (zero, its initializer and
    /// every value any function stores to it).
    fn global_var_range(&self, g: Handle<naga::GlobalVariable>) -> (u64, u64) {
        if let Some(r) = self.globals_memo.borrow().get(&g) {
            return *r;
        }
        self.globals_memo.borrow_mut().insert(g, TOP);
        let var = &self.module.global_variables[g];
        let mut parts = vec![match var.init {
            Some(init) => self.global_range(init),
            None => (0, 0),
        }];
        let mut unknown = false;
        for key in self.keys() {
            let func = self.func(key);
            each_statement(&func.body, &mut |s, _| {
                for (p, value) in writes(s) {
                    if root(func, p) == Root::Global(g) {
                        match value {
                            Some(value) if matches!(func.expressions[p], E::GlobalVariable(_)) => {
                                parts.push(self.range(key, value))
                            }
                            _ => unknown = true,
                        }
                    }
                }
            });
        }
        let r = if unknown { TOP } else { union(parts) };
        self.globals_memo.borrow_mut().insert(g, r);
        r
    }

    fn array_length_range(&self, key: Key, p: Handle<E>) -> (u64, u64) {
        let func = self.func(key);
        let Root::Global(g) = root(func, p) else {
            return TOP;
        };
        let mut ty = self.module.global_variables[g].ty;
        if let TypeInner::Struct { members, .. } = &self.module.types[ty].inner {
            match members.last() {
                Some(m) => ty = m.ty,
                None => return TOP,
            }
        }
        match self.module.types[ty].inner {
            TypeInner::Array { stride, .. } if stride > 0 => (
                0,
                self.limits.max_storage_buffer_binding_size / u64::from(stride),
            ),
            _ => TOP,
        }
    }

    /// The builtin an entry point's argument (or its component / struct member) carries.
    fn builtin(&self, key: Key, e: Handle<E>) -> Option<(BuiltIn, Option<u32>)> {
        let Key::Entry(i) = key else { return None };
        let func = self.func(key);
        let arg_binding = |a: u32, member: Option<u32>| -> Option<BuiltIn> {
            let arg = func.arguments.get(a as usize)?;
            let binding = match member {
                None => arg.binding.as_ref()?,
                Some(m) => match &self.module.types[arg.ty].inner {
                    TypeInner::Struct { members, .. } => {
                        members.get(m as usize)?.binding.as_ref()?
                    }
                    _ => return None,
                },
            };
            match binding {
                naga::Binding::BuiltIn(b) => Some(*b),
                _ => None,
            }
        };
        let is_struct = |a: u32| {
            func.arguments.get(a as usize).is_some_and(|arg| {
                matches!(self.module.types[arg.ty].inner, TypeInner::Struct { .. })
            })
        };
        let _ = i;
        match func.expressions[e] {
            E::FunctionArgument(a) => arg_binding(a, None).map(|b| (b, None)),
            E::AccessIndex { base, index } => match func.expressions[base] {
                E::FunctionArgument(a) if is_struct(a) => {
                    arg_binding(a, Some(index)).map(|b| (b, None))
                }
                E::FunctionArgument(a) => arg_binding(a, None).map(|b| (b, Some(index))),
                E::AccessIndex {
                    base: inner,
                    index: m,
                } => match func.expressions[inner] {
                    E::FunctionArgument(a) if is_struct(a) => {
                        arg_binding(a, Some(m)).map(|b| (b, Some(index)))
                    }
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    }

    fn builtin_range(&self, key: Key, (b, comp): (BuiltIn, Option<u32>)) -> (u64, u64) {
        let Key::Entry(i) = key else { return TOP };
        let size = self.module.entry_points[i].workgroup_size.map(u64::from);
        let size_of = |c: Option<u32>| match c {
            Some(c) => size.get(c as usize).copied().unwrap_or(MAX),
            None => size.iter().copied().max().unwrap_or(MAX),
        };
        let groups = u64::from(self.limits.max_workgroups_per_dimension);
        let invocations = size.iter().product::<u64>();
        match b {
            BuiltIn::LocalInvocationIndex => (0, invocations.saturating_sub(1)),
            BuiltIn::LocalInvocationId => (0, size_of(comp).saturating_sub(1)),
            BuiltIn::WorkGroupSize => {
                let s = size_of(comp);
                (
                    comp.map_or(size.iter().copied().min().unwrap_or(0), |_| s),
                    s,
                )
            }
            BuiltIn::WorkGroupId => (0, groups.saturating_sub(1)),
            BuiltIn::NumWorkGroups => (1, groups),
            BuiltIn::GlobalInvocationId => (0, (groups * size_of(comp)).saturating_sub(1)),
            BuiltIn::SubgroupSize => (1, 128),
            BuiltIn::SubgroupInvocationId => (0, 127),
            BuiltIn::NumSubgroups => (1, invocations.max(1)),
            BuiltIn::SubgroupId => (0, invocations.saturating_sub(1)),
            _ => TOP,
        }
    }
}

fn literal(l: Literal) -> (u64, u64) {
    match l {
        Literal::U32(v) => (u64::from(v), u64::from(v)),
        _ => TOP,
    }
}

fn union(parts: impl IntoIterator<Item = (u64, u64)>) -> (u64, u64) {
    parts
        .into_iter()
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
        .unwrap_or(TOP)
}

/// The bounds of `a op b` in u32 arithmetic (which wraps: a result that might wrap is unknown).
fn binary(op: Op, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    match op {
        Op::Add if sat_add(a.1, b.1) <= MAX => (a.0 + b.0, a.1 + b.1),
        Op::Subtract if a.0 >= b.1 => (a.0 - b.1, a.1 - b.0),
        Op::Multiply if a.1.saturating_mul(b.1) <= MAX => (a.0 * b.0, a.1 * b.1),
        // WGSL: x / 0 == x.
        Op::Divide => (
            a.0.checked_div(b.1).unwrap_or(a.0),
            a.1.checked_div(b.0).unwrap_or(a.1),
        ),
        Op::Modulo => (0, if b.0 >= 1 { a.1.min(b.1 - 1) } else { a.1 }),
        Op::And => (0, a.1.min(b.1)),
        Op::ShiftRight if b.1 <= 31 => (a.0 >> b.1, a.1 >> b.0),
        Op::ShiftLeft if b.1 <= 31 && (a.1 << b.1) <= MAX => (a.0 << b.0, a.1 << b.1),
        _ => TOP,
    }
}
