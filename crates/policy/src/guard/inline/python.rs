//! Python inline code: parsed by `rustpython-parser`, walked once with the names it binds.

use std::collections::HashMap;

use rustpython_ast::{self as ast, Constant, Expr, Visitor};
use rustpython_parser::{Mode, parse};

use super::apis::{self, Api, Method};
use super::{Act, join_path, mode_writes};

/// How deep `exec("…")` of constant code is followed.
const MAX_DEPTH: usize = 8;

/// Everything Python `code` does.
pub(super) fn analyse(code: &str) -> Vec<Act> {
    analyse_at(code, 0)
}

fn analyse_at(code: &str, depth: usize) -> Vec<Act> {
    match parse(code, Mode::Module, "<inline>") {
        Ok(ast::Mod::Module(module)) => {
            // First count how often each name is bound: only a name bound once holds a
            // constant or stands for a function wherever it is used (`d = ''` then `d += x`).
            let mut counter = Walker {
                counting: true,
                ..Walker::default()
            };
            for stmt in module.body.clone() {
                counter.visit_stmt(stmt);
            }
            let mut walker = Walker {
                depth,
                stores: counter.stores,
                ..Walker::default()
            };
            for stmt in module.body {
                walker.visit_stmt(stmt);
            }
            walker.acts
        }
        Ok(_) => vec![Act::Unparseable("not a module".into())],
        Err(e) => vec![Act::Unparseable(e.error.to_string())],
    }
}

#[derive(Default)]
struct Walker {
    /// Local names bound to qualified names (`sp` → `subprocess`, `s` → `os.system`).
    names: HashMap<String, String>,
    /// Modules imported with `*`.
    star: Vec<String>,
    /// Local names bound to constant strings.
    strings: HashMap<String, String>,
    /// Local names bound to constant lists of strings.
    lists: HashMap<String, Vec<String>>,
    /// How often each name is bound in the whole program (the first pass counts them).
    stores: HashMap<String, usize>,
    /// This pass only counts bindings.
    counting: bool,
    /// Loops around the current node.
    loops: usize,
    depth: usize,
    acts: Vec<Act>,
}

fn constant_str(c: &Constant) -> Option<String> {
    match c {
        Constant::Str(s) => Some(s.clone()),
        Constant::Bytes(b) => String::from_utf8(b.clone()).ok(),
        Constant::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

impl Walker {
    /// The qualified name an expression stands for (`sp.run` → `subprocess.run`).
    fn qualify(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) => {
                let id = n.id.as_str();
                if let Some(q) = self.names.get(id) {
                    return Some(q.clone());
                }
                for module in &self.star {
                    let q = format!("{module}.{id}");
                    if apis::python(&q).is_some() {
                        return Some(q);
                    }
                }
                Some(id.to_owned())
            }
            Expr::Attribute(a) => Some(format!("{}.{}", self.qualify(&a.value)?, a.attr.as_str())),
            // `sys.modules['os']` is the module.
            Expr::Subscript(s) if self.qualify(&s.value).as_deref() == Some("sys.modules") => {
                self.fold(&s.slice)
            }
            Expr::Call(c) => {
                let f = self.qualify(&c.func)?;
                match apis::python(&f) {
                    Some(Api::Import) => c.args.first().and_then(|a| self.fold(a)),
                    _ if f == "getattr" && c.args.len() >= 2 => Some(format!(
                        "{}.{}",
                        self.qualify(&c.args[0])?,
                        self.fold(&c.args[1])?
                    )),
                    _ => Some(format!("{f}()")),
                }
            }
            _ => None,
        }
    }

    /// The constant string an expression evaluates to, where the code shows it.
    fn fold(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Constant(c) => constant_str(&c.value),
            Expr::Name(n) => self.strings.get(n.id.as_str()).cloned(),
            Expr::JoinedStr(j) => j.values.iter().map(|v| self.fold(v)).collect(),
            Expr::FormattedValue(f) => self.fold(&f.value),
            Expr::BinOp(b) => {
                let (l, r) = (self.fold(&b.left)?, self.fold(&b.right)?);
                match b.op {
                    ast::Operator::Add => Some(l + &r),
                    ast::Operator::Div => Some(join_path(&[l, r])),
                    _ => None,
                }
            }
            Expr::Subscript(s) if self.is_environ(&s.value) => self
                .fold(&s.slice)
                .filter(|k| k == "HOME")
                .map(|_| "~".into()),
            Expr::Call(c) => self.fold_call(c),
            _ => None,
        }
    }

    fn fold_call(&self, c: &ast::ExprCall) -> Option<String> {
        let args = || -> Option<Vec<String>> { c.args.iter().map(|a| self.fold(a)).collect() };
        if let Some(f) = self.qualify(&c.func) {
            match f.as_str() {
                "os.path.join" | "posixpath.join" | "pathlib.Path" | "pathlib.PurePath"
                | "pathlib.PosixPath" | "str" | "os.fsencode" | "os.fsdecode" => {
                    return Some(join_path(&args()?));
                }
                "os.path.expanduser" | "os.path.abspath" | "os.path.realpath"
                | "os.path.normpath" => return c.args.first().and_then(|a| self.fold(a)),
                "pathlib.Path.home" | "os.path.expanduser()" => return Some("~".into()),
                "os.getenv" | "os.environ.get" => {
                    return c
                        .args
                        .first()
                        .and_then(|a| self.fold(a))
                        .filter(|k| k == "HOME")
                        .map(|_| "~".into());
                }
                _ => {}
            }
        }
        let Expr::Attribute(a) = c.func.as_ref() else {
            return None;
        };
        match a.attr.as_str() {
            "joinpath" => {
                let mut parts = vec![self.fold(&a.value)?];
                parts.extend(args()?);
                Some(join_path(&parts))
            }
            "expanduser" | "resolve" | "absolute" | "encode" | "decode" | "strip" => {
                self.fold(&a.value)
            }
            "join" => Some(self.fold_list(c.args.first()?)?.join(&self.fold(&a.value)?)),
            _ => None,
        }
    }

    /// The constant list of strings an expression evaluates to.
    fn fold_list(&self, e: &Expr) -> Option<Vec<String>> {
        match e {
            Expr::List(l) => l.elts.iter().map(|v| self.fold(v)).collect(),
            Expr::Tuple(t) => t.elts.iter().map(|v| self.fold(v)).collect(),
            Expr::Name(n) => self.lists.get(n.id.as_str()).cloned(),
            Expr::Call(c) => match self.qualify(&c.func).as_deref() {
                Some("shlex.split") => Some(
                    self.fold(c.args.first()?)?
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect(),
                ),
                _ => None,
            },
            _ => None,
        }
    }

    fn is_environ(&self, e: &Expr) -> bool {
        self.qualify(e)
            .is_some_and(|q| apis::python(&q) == Some(Api::EnvAll))
    }

    /// Whether an expression is a path object (`Path(…)`, `p / "x"`, a name bound to one).
    fn is_path(&self, e: &Expr) -> bool {
        match e {
            Expr::BinOp(b) => self.is_path(&b.left),
            _ => self.qualify(e).is_some_and(|q| q.starts_with("pathlib.")),
        }
    }

    fn keyword_true(c: &ast::ExprCall, name: &str) -> bool {
        c.keywords.iter().any(|k| {
            k.arg.as_ref().is_some_and(|a| a.as_str() == name)
                && !matches!(&k.value, Expr::Constant(v) if matches!(v.value, Constant::Bool(false) | Constant::None))
        })
    }

    fn keyword(c: &ast::ExprCall, name: &str) -> Option<Expr> {
        c.keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == name))
            .map(|k| k.value.clone())
    }

    fn spawn(&self, c: &ast::ExprCall) -> Act {
        let Some(first) = c.args.first() else {
            return Act::Exec(None);
        };
        if let Some(argv) = self.fold_list(first) {
            return Act::Exec(Some(argv));
        }
        // `os.spawnv(mode, path, args)`, `os.execv(path, args)`: the path, then the list whose
        // first entry is the program's own name.
        let path_at = usize::from(
            !matches!(first, Expr::Constant(c) if matches!(c.value, Constant::Str(_)))
                && c.args.len() > 2,
        );
        let path = c.args.get(path_at).and_then(|a| self.fold(a));
        let rest = c.args.get(path_at + 1).and_then(|a| self.fold_list(a));
        match (path, rest) {
            (Some(p), Some(list)) => {
                let mut argv = vec![p];
                argv.extend(list.into_iter().skip(1));
                Act::Exec(Some(argv))
            }
            (Some(p), None) if c.args.len() <= path_at + 1 => Act::Exec(Some(vec![p])),
            _ => Act::Exec(None),
        }
    }

    /// The act of calling `api` with the arguments of `c`.
    fn act(&mut self, api: Api, c: &ast::ExprCall) -> Option<Act> {
        let arg = |i: usize| c.args.get(i).and_then(|a| self.fold(a));
        Some(match api {
            Api::Shell => Act::Shell(arg(0)),
            Api::SpawnOrShell if Self::keyword_true(c, "shell") => {
                Act::Shell(arg(0).or_else(|| {
                    c.args
                        .first()
                        .and_then(|a| self.fold_list(a))
                        .map(|l| l.join(" "))
                }))
            }
            Api::Spawn | Api::SpawnOrShell => self.spawn(c),
            Api::Process => Act::Exec(None),
            Api::Fork => Act::Fork {
                in_loop: self.loops > 0,
            },
            Api::Signal => Act::Signal(arg(0)),
            Api::Network => Act::Network,
            Api::Open => {
                let mode = c
                    .args
                    .get(1)
                    .cloned()
                    .or_else(|| Self::keyword(c, "mode"))
                    .map_or(Some("r".to_owned()), |m| self.fold(&m));
                if mode.is_none_or(|m| mode_writes(&m)) {
                    Act::Write {
                        path: arg(0),
                        content: None,
                    }
                } else {
                    Act::Read(arg(0))
                }
            }
            Api::Read(i) => Act::Read(arg(i)),
            Api::Write(i) => Act::Write {
                path: arg(i),
                content: None,
            },
            Api::Remove(recursive) => Act::Remove {
                path: arg(0),
                recursive,
            },
            Api::EnvAll => Act::EnvAll,
            Api::EnvGet => Act::EnvGet(arg(0)),
            Api::Eval => match arg(0) {
                Some(code) if self.depth < MAX_DEPTH => {
                    self.acts.extend(analyse_at(&code, self.depth + 1));
                    return None;
                }
                _ => Act::DynamicCode,
            },
            Api::Dynamic => Act::DynamicCode,
            Api::Import => {
                arg(0)?;
                return None;
            }
            Api::Native => Act::Native,
            Api::Inert => return None,
        })
    }

    /// The act of a path method (`Path(p).write_text(s)`) called on a path object.
    fn method(&self, c: &ast::ExprCall) -> Option<Act> {
        let Expr::Attribute(a) = c.func.as_ref() else {
            return None;
        };
        let method = apis::python_method(a.attr.as_str())?;
        if !self.is_path(&a.value) {
            return None;
        }
        let path = self.fold(&a.value);
        Some(match method {
            Method::Read => Act::Read(path),
            Method::Write => Act::Write {
                path,
                content: c.args.first().and_then(|v| self.fold(v)),
            },
            Method::Remove => Act::Remove {
                path,
                recursive: false,
            },
        })
    }

    /// A reference that is not called: handing `os.system` to `map`, printing `os.environ`.
    fn reference(&mut self, e: &Expr) {
        let Some(q) = self.qualify(e) else {
            return;
        };
        if q.split('.').any(|part| {
            matches!(
                part,
                "__dict__" | "__builtins__" | "__globals__" | "__subclasses__" | "__getattribute__"
            )
        }) {
            self.acts.push(Act::DynamicCode);
            return;
        }
        let act = match apis::python(&q) {
            Some(Api::Shell) => Act::Shell(None),
            Some(Api::Spawn | Api::SpawnOrShell | Api::Process) => Act::Exec(None),
            Some(Api::Fork) => Act::Fork {
                in_loop: self.loops > 0,
            },
            Some(Api::Signal) => Act::Signal(None),
            Some(Api::Network) => Act::Network,
            Some(Api::EnvAll) => Act::EnvAll,
            Some(Api::Eval | Api::Dynamic) => Act::DynamicCode,
            Some(Api::Native) => Act::Native,
            Some(Api::Open | Api::Read(_)) => Act::Read(None),
            Some(Api::Write(_)) => Act::Write {
                path: None,
                content: None,
            },
            Some(Api::Remove(recursive)) => Act::Remove {
                path: None,
                recursive,
            },
            Some(Api::EnvGet | Api::Import | Api::Inert) | None => return,
        };
        self.acts.push(act);
    }

    /// Whether an expression is a plain dotted name (`os.path.sep`), walked as one reference.
    fn dotted(e: &Expr) -> bool {
        match e {
            Expr::Name(_) => true,
            Expr::Attribute(a) => Self::dotted(&a.value),
            _ => false,
        }
    }

    /// Whether `name` is bound more than once: it holds no one value.
    fn rebound(&self, name: &str) -> bool {
        self.stores.get(name).is_some_and(|n| *n > 1)
    }

    fn count(&mut self, name: &str) {
        if self.counting {
            *self.stores.entry(name.to_owned()).or_default() += 1;
        }
    }

    fn bind(&mut self, target: &str, value: &Expr) {
        self.strings.remove(target);
        self.lists.remove(target);
        self.names.remove(target);
        if self.rebound(target) {
            return;
        }
        if let Some(s) = self.fold(value) {
            self.strings.insert(target.to_owned(), s);
        } else if let Some(l) = self.fold_list(value) {
            self.lists.insert(target.to_owned(), l);
        } else if matches!(value, Expr::Name(_) | Expr::Attribute(_) | Expr::Call(_))
            && let Some(q) = self.qualify(value)
        {
            self.names.insert(target.to_owned(), q);
        }
    }
}

impl Visitor for Walker {
    fn visit_stmt_import(&mut self, node: ast::StmtImport) {
        for alias in node.names {
            let name = alias.name.as_str();
            let local = alias.asname.as_ref().map_or(name, |a| a.as_str());
            let local = local.split('.').next().unwrap_or(local).to_owned();
            self.count(&local);
            match alias.asname {
                Some(local) => self
                    .names
                    .insert(local.as_str().to_owned(), name.to_owned()),
                None => {
                    let top = name.split('.').next().unwrap_or(name);
                    self.names.insert(top.to_owned(), top.to_owned())
                }
            };
        }
    }

    fn visit_stmt_import_from(&mut self, node: ast::StmtImportFrom) {
        if node.level.is_some_and(|l| l.to_u32() > 0) {
            return;
        }
        let module = node.module.as_ref().map_or("", |m| m.as_str());
        for alias in node.names {
            let name = alias.name.as_str();
            if name == "*" {
                self.star.push(module.to_owned());
                continue;
            }
            let local = alias.asname.as_ref().map_or(name, |a| a.as_str());
            self.count(local);
            self.names
                .insert(local.to_owned(), format!("{module}.{name}"));
        }
    }

    fn visit_stmt_assign(&mut self, node: ast::StmtAssign) {
        if let [Expr::Name(target)] = node.targets.as_slice() {
            let target = target.id.as_str().to_owned();
            self.bind(&target, &node.value);
            // `f = os.system` only names the function: it is judged where `f` is used.
            if !self.counting && Self::dotted(&node.value) && self.names.contains_key(&target) {
                return;
            }
        }
        self.generic_visit_stmt_assign(node);
    }

    fn visit_stmt_for(&mut self, node: ast::StmtFor) {
        self.loops += 1;
        self.generic_visit_stmt_for(node);
        self.loops -= 1;
    }

    fn visit_stmt_async_for(&mut self, node: ast::StmtAsyncFor) {
        self.loops += 1;
        self.generic_visit_stmt_async_for(node);
        self.loops -= 1;
    }

    fn visit_stmt_while(&mut self, node: ast::StmtWhile) {
        self.loops += 1;
        self.generic_visit_stmt_while(node);
        self.loops -= 1;
    }

    fn visit_expr_list_comp(&mut self, node: ast::ExprListComp) {
        self.loops += 1;
        self.generic_visit_expr_list_comp(node);
        self.loops -= 1;
    }

    fn visit_expr_set_comp(&mut self, node: ast::ExprSetComp) {
        self.loops += 1;
        self.generic_visit_expr_set_comp(node);
        self.loops -= 1;
    }

    fn visit_expr_generator_exp(&mut self, node: ast::ExprGeneratorExp) {
        self.loops += 1;
        self.generic_visit_expr_generator_exp(node);
        self.loops -= 1;
    }

    fn visit_expr_dict_comp(&mut self, node: ast::ExprDictComp) {
        self.loops += 1;
        self.generic_visit_expr_dict_comp(node);
        self.loops -= 1;
    }

    // The generated visitor leaves these nodes' expressions unvisited; every one can run code.
    fn visit_comprehension(&mut self, node: ast::Comprehension) {
        self.visit_expr(node.iter);
        self.visit_expr(node.target);
        for cond in node.ifs {
            self.visit_expr(cond);
        }
    }

    fn visit_withitem(&mut self, node: ast::WithItem) {
        self.visit_expr(node.context_expr);
        if let Some(vars) = node.optional_vars {
            self.visit_expr(*vars);
        }
    }

    fn visit_keyword(&mut self, node: ast::Keyword) {
        self.visit_expr(node.value);
    }

    fn visit_arguments(&mut self, node: ast::Arguments) {
        let all = node
            .posonlyargs
            .into_iter()
            .chain(node.args)
            .chain(node.kwonlyargs);
        for arg in all {
            self.visit_arg(arg.def);
            if let Some(default) = arg.default {
                self.visit_expr(*default);
            }
        }
        for arg in node.vararg.into_iter().chain(node.kwarg) {
            self.visit_arg(*arg);
        }
    }

    fn visit_arg(&mut self, node: ast::Arg) {
        self.count(node.arg.as_str());
        if let Some(annotation) = node.annotation {
            self.visit_expr(*annotation);
        }
    }

    fn visit_match_case(&mut self, node: ast::MatchCase) {
        if let Some(guard) = node.guard {
            self.visit_expr(*guard);
        }
        for stmt in node.body {
            self.visit_stmt(stmt);
        }
    }

    fn visit_expr_call(&mut self, node: ast::ExprCall) {
        let api = self.qualify(&node.func).and_then(|q| apis::python(&q));
        let act = match api {
            Some(api) => self.act(api, &node),
            None => self.method(&node),
        };
        self.acts.extend(act);
        match *node.func {
            // The callee was judged as a whole; what it is reached through may run code
            // (`__import__('os').system`, `open(p).write`).
            Expr::Attribute(a) if !Self::dotted(&a.value) => self.visit_expr(*a.value),
            Expr::Attribute(a) if api.is_none() => self.reference(&a.value),
            Expr::Name(_) | Expr::Attribute(_) => {}
            other => self.visit_expr(other),
        }
        for arg in node.args {
            self.visit_expr(arg);
        }
        for keyword in node.keywords {
            self.visit_expr(keyword.value);
        }
    }

    fn visit_expr_attribute(&mut self, node: ast::ExprAttribute) {
        let e = Expr::Attribute(node);
        // `__import__('os').system` passed on is `os.system` too.
        self.reference(&e);
        if !Self::dotted(&e)
            && let Expr::Attribute(a) = e
        {
            self.generic_visit_expr_attribute(a);
        }
    }

    fn visit_expr_name(&mut self, node: ast::ExprName) {
        if node.ctx == ast::ExprContext::Store {
            self.count(node.id.as_str());
        }
        if node.ctx == ast::ExprContext::Load && self.names.contains_key(node.id.as_str()) {
            self.reference(&Expr::Name(node));
        }
    }

    fn visit_expr_subscript(&mut self, node: ast::ExprSubscript) {
        if self.is_environ(&node.value) {
            self.acts.push(Act::EnvGet(self.fold(&node.slice)));
            self.visit_expr(*node.slice);
        } else {
            self.generic_visit_expr_subscript(node);
        }
    }

    fn visit_expr_compare(&mut self, node: ast::ExprCompare) {
        // `'CI' in os.environ` asks whether one variable is set.
        self.visit_expr(*node.left);
        for (op, right) in node.ops.iter().zip(node.comparators) {
            if matches!(op, ast::CmpOp::In | ast::CmpOp::NotIn) && self.is_environ(&right) {
                continue;
            }
            self.visit_expr(right);
        }
    }
}
