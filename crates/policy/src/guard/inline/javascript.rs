//! JavaScript and TypeScript inline code: parsed by `oxc_parser`, walked once with the names
//! it binds (`require`, `import`, destructuring, `import(…).then(m => …)`).

use std::collections::HashMap;

use oxc_allocator::Allocator;
use oxc_ast::ast::{
    Argument, AssignmentExpression, BinaryExpression, BinaryOperator, BindingIdentifier,
    BindingPatternKind, CallExpression, ComputedMemberExpression, Expression, IdentifierReference,
    ImportDeclaration, ImportDeclarationSpecifier, ImportExpression, ModuleExportName,
    NewExpression, ObjectPropertyKind, StaticMemberExpression, UpdateExpression,
    VariableDeclarator,
};
use oxc_ast_visit::{Visit, walk};
use oxc_parser::Parser;
use oxc_span::SourceType;

use super::apis::{self, Api};
use super::{Act, join_path, mode_writes};

/// How deep `eval("…")` of constant code is followed.
const MAX_DEPTH: usize = 8;

/// Everything JavaScript (or TypeScript) `code` does.
pub(super) fn analyse(code: &str, typescript: bool) -> Vec<Act> {
    analyse_at(code, typescript, 0)
}

fn analyse_at(code: &str, typescript: bool, depth: usize) -> Vec<Act> {
    let allocator = Allocator::default();
    let source_type = if typescript {
        SourceType::ts()
    } else {
        SourceType::unambiguous()
    };
    let parsed = Parser::new(&allocator, code, source_type).parse();
    if let Some(error) = parsed.errors.first() {
        return vec![Act::Unparseable(error.to_string())];
    }
    if parsed.panicked {
        return vec![Act::Unparseable("the parser gave up".into())];
    }
    // First count how often each name is bound: only a name bound once holds a constant or
    // stands for a function wherever it is used (`let d = ''` then `d += chunk`).
    let mut counter = Walker {
        counting: true,
        ..Walker::default()
    };
    counter.visit_program(&parsed.program);
    let mut walker = Walker {
        typescript,
        depth,
        stores: counter.stores,
        ..Walker::default()
    };
    walker.visit_program(&parsed.program);
    walker.acts
}

#[derive(Default)]
struct Walker {
    /// Local names bound to qualified names (`cp` → `child_process`).
    names: HashMap<String, String>,
    /// Local names bound to constant strings.
    strings: HashMap<String, String>,
    /// Local names bound to constant arrays of strings.
    lists: HashMap<String, Vec<String>>,
    /// How often each name is bound in the whole program (the first pass counts them).
    stores: HashMap<String, usize>,
    /// This pass only counts bindings.
    counting: bool,
    typescript: bool,
    depth: usize,
    acts: Vec<Act>,
}

/// A module name as the table spells it: `node:fs/promises` is `fs`.
fn module(name: &str) -> String {
    let name = name.strip_prefix("node:").unwrap_or(name);
    name.strip_suffix("/promises").unwrap_or(name).to_owned()
}

fn expr<'b, 'a>(arg: Option<&'b Argument<'a>>) -> Option<&'b Expression<'a>> {
    arg.and_then(|a| a.as_expression())
}

impl Walker {
    /// The qualified name an expression stands for (`cp.execSync` → `child_process.execSync`).
    fn qualify(&self, e: &Expression) -> Option<String> {
        match e.without_parentheses() {
            Expression::Identifier(id) => Some(
                self.names
                    .get(id.name.as_str())
                    .cloned()
                    .unwrap_or_else(|| id.name.to_string()),
            ),
            Expression::StaticMemberExpression(m) => self.member(m),
            Expression::ComputedMemberExpression(m) => {
                let (base, key) = (self.qualify(&m.object)?, self.fold(&m.expression)?);
                if matches!(base.as_str(), "globalThis" | "global" | "window" | "self") {
                    return Some(key);
                }
                Some(format!("{base}.{key}"))
            }
            Expression::CallExpression(c) => {
                let f = self.qualify(&c.callee)?;
                // `require`, and the same function reached through a module object
                // (`process.mainModule.require`).
                if f == "require" || f.ends_with(".require") {
                    return Some(module(&self.fold(expr(c.arguments.first())?)?));
                }
                Some(format!("{f}()"))
            }
            Expression::ImportExpression(i) => Some(module(&self.fold(&i.source)?)),
            Expression::AwaitExpression(a) => self.qualify(&a.argument),
            Expression::ChainExpression(c) => c.expression.as_member_expression().and_then(|m| {
                Some(format!(
                    "{}.{}",
                    self.qualify(m.object())?,
                    m.static_property_name()?
                ))
            }),
            _ => None,
        }
    }

    fn member(&self, m: &StaticMemberExpression) -> Option<String> {
        let base = self.qualify(&m.object)?;
        // The global object's properties are the globals (`globalThis.eval`, `window.fetch`).
        if matches!(base.as_str(), "globalThis" | "global" | "window" | "self") {
            return Some(m.property.name.to_string());
        }
        // `fs.promises.writeFile` is `fs.writeFile`.
        if base == "fs" && m.property.name == "promises" {
            return Some(base);
        }
        Some(format!("{base}.{}", m.property.name))
    }

    /// The constant string an expression evaluates to, where the code shows it.
    fn fold(&self, e: &Expression) -> Option<String> {
        match e.without_parentheses() {
            Expression::StringLiteral(s) => Some(s.value.to_string()),
            Expression::NumericLiteral(n) => Some(n.value.to_string()),
            Expression::Identifier(id) => self.strings.get(id.name.as_str()).cloned(),
            Expression::TemplateLiteral(t) => {
                let mut out = String::new();
                for (i, quasi) in t.quasis.iter().enumerate() {
                    out.push_str(quasi.value.cooked.as_ref()?.as_str());
                    if let Some(e) = t.expressions.get(i) {
                        out.push_str(&self.fold(e)?);
                    }
                }
                Some(out)
            }
            Expression::BinaryExpression(b) if b.operator == BinaryOperator::Addition => {
                Some(self.fold(&b.left)? + &self.fold(&b.right)?)
            }
            Expression::StaticMemberExpression(_) => match self.qualify(e)?.as_str() {
                "process.env.HOME" => Some("~".into()),
                _ => None,
            },
            Expression::CallExpression(c) => self.fold_call(c),
            _ => None,
        }
    }

    fn fold_call(&self, c: &CallExpression) -> Option<String> {
        let args = || -> Option<Vec<String>> {
            c.arguments
                .iter()
                .map(|a| a.as_expression().and_then(|e| self.fold(e)))
                .collect()
        };
        match self.qualify(&c.callee).as_deref() {
            Some("path.join" | "path.resolve" | "path.posix.join" | "String") => {
                return Some(join_path(&args()?));
            }
            Some("os.homedir" | "Deno.env.get.HOME") => return Some("~".into()),
            _ => {}
        }
        let Expression::StaticMemberExpression(m) = c.callee.without_parentheses() else {
            return None;
        };
        match m.property.name.as_str() {
            "toString" | "trim" => self.fold(&m.object),
            "join" => Some(
                self.fold_list(&m.object)?
                    .join(&expr(c.arguments.first()).map_or(Some(",".into()), |s| self.fold(s))?),
            ),
            _ => None,
        }
    }

    /// The constant array of strings an expression evaluates to.
    fn fold_list(&self, e: &Expression) -> Option<Vec<String>> {
        match e.without_parentheses() {
            Expression::ArrayExpression(a) => a
                .elements
                .iter()
                .map(|el| el.as_expression().and_then(|e| self.fold(e)))
                .collect(),
            Expression::Identifier(id) => self.lists.get(id.name.as_str()).cloned(),
            _ => None,
        }
    }

    fn is_env(&self, e: &Expression) -> bool {
        self.qualify(e)
            .is_some_and(|q| apis::javascript(&q) == Some(Api::EnvAll))
    }

    /// `{shell: true}` among the call's arguments.
    fn shell_option(args: &[Argument]) -> bool {
        args.iter().any(|a| {
            let Some(Expression::ObjectExpression(o)) = a.as_expression() else {
                return false;
            };
            o.properties.iter().any(|p| {
                matches!(p, ObjectPropertyKind::ObjectProperty(p)
                    if p.key.static_name().is_some_and(|k| k == "shell")
                        && !matches!(&p.value, Expression::BooleanLiteral(b) if !b.value))
            })
        })
    }

    fn spawn(&self, args: &[Argument]) -> Act {
        let first = expr(args.first());
        if let Some(list) = first.and_then(|e| self.fold_list(e)) {
            return Act::Exec(Some(list));
        }
        let Some(program) = first.and_then(|e| self.fold(e)) else {
            return Act::Exec(None);
        };
        let mut argv = vec![program];
        match expr(args.get(1)) {
            Some(Expression::ObjectExpression(_)) | None => {}
            Some(list) => match self.fold_list(list) {
                Some(rest) => argv.extend(rest),
                None => return Act::Exec(None),
            },
        }
        if Self::shell_option(args) {
            return Act::Shell(Some(argv.join(" ")));
        }
        Act::Exec(Some(argv))
    }

    /// The act of calling `api` (named `name`) with the arguments of `c`.
    fn act(&mut self, name: &str, api: Api, args: &[Argument]) -> Option<Act> {
        let arg = |i: usize| expr(args.get(i)).and_then(|e| self.fold(e));
        Some(match api {
            Api::Shell => Act::Shell(arg(0)),
            Api::Spawn | Api::SpawnOrShell => self.spawn(args),
            Api::Process => Act::Exec(None),
            Api::Fork => Act::Fork { in_loop: false },
            Api::Signal => Act::Signal(arg(0)),
            Api::Network => Act::Network,
            Api::Open => {
                let flags = match expr(args.get(1)) {
                    None => Some("r".to_owned()),
                    Some(e) => self.fold(e),
                };
                if flags.is_none_or(|f| mode_writes(&f)) {
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
                content: if i == 0 { arg(1) } else { None },
            },
            Api::Remove(recursive) => Act::Remove {
                path: arg(0),
                recursive,
            },
            Api::EnvAll => Act::EnvAll,
            Api::EnvGet => Act::EnvGet(arg(0)),
            Api::Eval => {
                // `new Function(a, b, body)`: the body is the last argument.
                let at = if name == "Function" {
                    args.len().saturating_sub(1)
                } else {
                    0
                };
                let code = if name == "Function" {
                    arg(at).map(|body| format!("(function () {{\n{body}\n}})"))
                } else {
                    arg(at)
                };
                match code {
                    Some(code) if self.depth < MAX_DEPTH => {
                        self.acts
                            .extend(analyse_at(&code, self.typescript, self.depth + 1));
                        return None;
                    }
                    _ => Act::DynamicCode,
                }
            }
            Api::Dynamic => Act::DynamicCode,
            Api::Import => {
                arg(0)?;
                return None;
            }
            Api::Native => Act::Native,
            Api::Inert => return None,
        })
    }

    /// A reference that is not called: passing `fetch` on, printing `process.env`.
    fn reference(&mut self, q: &str) {
        let act = match apis::javascript(q) {
            Some(Api::Shell) => Act::Shell(None),
            Some(Api::Spawn | Api::SpawnOrShell | Api::Process) => Act::Exec(None),
            Some(Api::Fork) => Act::Fork { in_loop: false },
            Some(Api::Signal) => Act::Signal(None),
            Some(Api::Network) => Act::Network,
            Some(Api::EnvAll) => Act::EnvAll,
            Some(Api::EnvGet) => Act::EnvGet(q.rsplit('.').next().map(str::to_owned)),
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
            Some(Api::Import | Api::Inert) | None => return,
        };
        self.acts.push(act);
    }

    /// Whether an expression is a plain dotted name (`path.sep`), judged as one reference.
    fn dotted(e: &Expression) -> bool {
        match e.without_parentheses() {
            Expression::Identifier(_) => true,
            Expression::StaticMemberExpression(m) => Self::dotted(&m.object),
            _ => false,
        }
    }

    fn count(&mut self, name: &str) {
        if self.counting {
            *self.stores.entry(name.to_owned()).or_default() += 1;
        }
    }

    fn bind(&mut self, target: &str, value: &Expression) {
        self.strings.remove(target);
        self.lists.remove(target);
        self.names.remove(target);
        if self.stores.get(target).is_some_and(|n| *n > 1) {
            return;
        }
        if let Some(s) = self.fold(value) {
            self.strings.insert(target.to_owned(), s);
        } else if let Some(l) = self.fold_list(value) {
            self.lists.insert(target.to_owned(), l);
        } else if let Some(q) = self.qualify(value) {
            self.names.insert(target.to_owned(), q);
        }
    }

    /// `import('child_process').then(m => m.exec(…))`: the callback's parameter is the module.
    fn bind_then(&mut self, c: &CallExpression) {
        let Expression::StaticMemberExpression(m) = c.callee.without_parentheses() else {
            return;
        };
        if m.property.name != "then" {
            return;
        }
        let Some(q) = self.qualify(&m.object) else {
            return;
        };
        let params = match expr(c.arguments.first()) {
            Some(Expression::ArrowFunctionExpression(f)) => &f.params,
            Some(Expression::FunctionExpression(f)) => &f.params,
            _ => return,
        };
        if let Some(BindingPatternKind::BindingIdentifier(id)) =
            params.items.first().map(|p| &p.pattern.kind)
        {
            self.names.insert(id.name.to_string(), q);
        }
    }

    fn call(&mut self, c: &CallExpression<'_>) {
        // A promise's `then`, `catch` and `finally` are not the module's own functions.
        let promise = matches!(c.callee.without_parentheses(),
            Expression::StaticMemberExpression(m) if matches!(m.property.name.as_str(), "then" | "catch" | "finally"));
        let name = self.qualify(&c.callee).filter(|_| !promise).or_else(|| {
            // `x.constructor.constructor(code)` reaches `Function` through any object.
            matches!(c.callee.without_parentheses(),
                Expression::StaticMemberExpression(m) if m.property.name == "constructor")
            .then(|| "Function".to_owned())
        });
        let api = name.as_deref().and_then(apis::javascript);
        if let (Some(name), Some(api)) = (&name, api) {
            let act = self.act(name, api, &c.arguments);
            self.acts.extend(act);
        }
        self.bind_then(c);
        match c.callee.without_parentheses() {
            Expression::StaticMemberExpression(m) if !Self::dotted(&m.object) => {
                self.visit_expression(&m.object);
            }
            Expression::StaticMemberExpression(m) if api.is_none() => {
                if let Some(q) = self.qualify(&m.object) {
                    self.reference(&q);
                }
            }
            Expression::Identifier(_) | Expression::StaticMemberExpression(_) => {}
            other => self.visit_expression(other),
        }
        for arg in &c.arguments {
            self.visit_argument(arg);
        }
    }
}

impl<'a> Visit<'a> for Walker {
    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        self.call(it);
    }

    fn visit_new_expression(&mut self, it: &NewExpression<'a>) {
        let name = self.qualify(&it.callee);
        if let Some(name) = name
            && let Some(api) = apis::javascript(&name)
        {
            let act = self.act(&name, api, &it.arguments);
            self.acts.extend(act);
        }
        if !Self::dotted(&it.callee) {
            self.visit_expression(&it.callee);
        }
        for arg in &it.arguments {
            self.visit_argument(arg);
        }
    }

    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        if self.fold(&it.source).is_none() {
            self.acts.push(Act::DynamicCode);
        }
        walk::walk_import_expression(self, it);
    }

    fn visit_static_member_expression(&mut self, it: &StaticMemberExpression<'a>) {
        if let Some(q) = self.member(it) {
            self.reference(&q);
        }
        if !Self::dotted(&it.object) {
            walk::walk_static_member_expression(self, it);
        }
    }

    fn visit_computed_member_expression(&mut self, it: &ComputedMemberExpression<'a>) {
        if self.is_env(&it.object) {
            self.acts.push(Act::EnvGet(self.fold(&it.expression)));
            self.visit_expression(&it.expression);
        } else {
            walk::walk_computed_member_expression(self, it);
        }
    }

    fn visit_binary_expression(&mut self, it: &BinaryExpression<'a>) {
        // `'CI' in process.env` asks whether one variable is set.
        if it.operator == BinaryOperator::In && self.is_env(&it.right) {
            self.visit_expression(&it.left);
        } else {
            walk::walk_binary_expression(self, it);
        }
    }

    fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
        let name = it.name.as_str();
        let q = self
            .names
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_owned());
        self.reference(&q);
    }

    fn visit_binding_identifier(&mut self, it: &BindingIdentifier<'a>) {
        self.count(it.name.as_str());
    }

    fn visit_assignment_expression(&mut self, it: &AssignmentExpression<'a>) {
        if let Some(name) = it.left.get_identifier_name() {
            self.count(name);
        }
        walk::walk_assignment_expression(self, it);
    }

    fn visit_update_expression(&mut self, it: &UpdateExpression<'a>) {
        if let Some(name) = it.argument.get_identifier_name() {
            self.count(name);
        }
        walk::walk_update_expression(self, it);
    }

    fn visit_variable_declarator(&mut self, it: &VariableDeclarator<'a>) {
        if self.counting {
            walk::walk_variable_declarator(self, it);
            return;
        }
        if let Some(init) = &it.init {
            match &it.id.kind {
                BindingPatternKind::BindingIdentifier(id) => {
                    self.bind(id.name.as_str(), init);
                    // `const f = cp.exec` only names the function: judged where `f` is used.
                    if Self::dotted(init) && self.names.contains_key(id.name.as_str()) {
                        return;
                    }
                }
                BindingPatternKind::ObjectPattern(o) => {
                    if let Some(q) = self.qualify(init) {
                        for p in &o.properties {
                            if let (Some(key), BindingPatternKind::BindingIdentifier(id)) =
                                (p.key.static_name(), &p.value.kind)
                            {
                                self.names.insert(id.name.to_string(), format!("{q}.{key}"));
                            }
                        }
                    }
                }
                _ => {}
            }
            self.visit_expression(init);
        }
        // Default values in a pattern run too (`const {a = f()} = {}`).
        self.visit_binding_pattern(&it.id);
    }

    fn visit_import_declaration(&mut self, it: &ImportDeclaration<'a>) {
        let m = module(it.source.value.as_str());
        for s in it.specifiers.iter().flatten() {
            match s {
                ImportDeclarationSpecifier::ImportSpecifier(s) => {
                    let imported = match &s.imported {
                        ModuleExportName::IdentifierName(n) => n.name.to_string(),
                        ModuleExportName::IdentifierReference(n) => n.name.to_string(),
                        ModuleExportName::StringLiteral(n) => n.value.to_string(),
                    };
                    self.names
                        .insert(s.local.name.to_string(), format!("{m}.{imported}"));
                }
                ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => {
                    self.names.insert(s.local.name.to_string(), m.clone());
                }
                ImportDeclarationSpecifier::ImportNamespaceSpecifier(s) => {
                    self.names.insert(s.local.name.to_string(), m.clone());
                }
            }
        }
    }
}
