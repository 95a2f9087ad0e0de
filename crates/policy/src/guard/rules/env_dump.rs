//! `env_dump`: commands that print the whole environment (where the secrets live): `env`,
//! `printenv`, `export -p`, `declare -x`, `set` without arguments, `ps e`, and interpreter
//! code that prints its whole environment. `printenv HOME` and `echo $USER` print one value.

use super::super::Family;
use super::super::command::{Spec, parse_args};
use super::super::effects::Effects;
use super::super::normalize::{Arg, is_secret_name};

pub(super) fn check(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    let dumps = match name {
        "printenv" => {
            parse_args(args, &Spec::gnu("", &[])).operands.is_empty()
                && !args
                    .iter()
                    .any(|a| a.text == "--help" || a.text == "--version")
        }
        "export" => args.iter().all(|a| a.text == "-p"),
        "declare" | "typeset" => {
            let p = parse_args(args, &Spec::gnu("", &[]));
            p.operands.is_empty()
                && p.opts
                    .iter()
                    .all(|o| matches!(o.short, Some('x') | Some('p')))
        }
        "set" => args.is_empty(),
        // `compgen -v` / `-e` / `-A variable|export` list the shell's variables.
        "compgen" => {
            let p = parse_args(args, &Spec::gnu("AGWFCXPSo", &["action"]));
            p.has_short('v')
                || p.has_short('e')
                || p.values(Some('A'), &["action"])
                    .any(|v| matches!(v, "variable" | "export"))
        }
        "ps" => args.iter().any(|a| {
            !a.text.starts_with('-')
                && a.text.contains('e')
                && a.text.chars().all(|c| c.is_ascii_alphabetic())
        }),
        _ => false,
    };
    // `echo $AWS_SECRET_ACCESS_KEY`, `printenv GITHUB_TOKEN`: one secret, printed where the
    // agent reads it. Piped into a program (`| docker login --password-stdin`) it is used.
    let prints_secret = match name {
        "echo" | "printf" => args.iter().any(|a| a.taint.env_secret),
        "printenv" => args.iter().any(|a| is_secret_name(&a.text)),
        _ => false,
    };
    if prints_secret && !w.concurrent() {
        w.deny(
            Family::EnvDump,
            format!("`{shown}` prints a secret environment variable."),
        );
    }
    if dumps {
        w.deny(
            Family::EnvDump,
            format!("`{shown}` prints the whole environment, secrets included."),
        );
    }
}

/// Interpreter code that prints its whole environment (`print(os.environ)`, `process.env`,
/// `%ENV`, `ENV.to_h`, `getenv()`), as opposed to reading one variable.
pub(crate) fn code_dumps_env(code: &str) -> bool {
    let whole = |pattern: &str, allowed_next: &[&str]| {
        code.match_indices(pattern).any(|(i, m)| {
            let after = &code[i + m.len()..];
            !allowed_next.iter().any(|n| after.starts_with(n))
        })
    };
    whole("os.environ", &["[", ".get(", ".setdefault(", ".pop("])
        || whole("process.env", &[".", "[", "?.["])
        || code.contains("%ENV")
        || ruby_env_dump(code)
        || code.contains("getenv()")
        || code.contains("$_ENV")
        || code.contains("$_SERVER")
        || code.contains("os.getenv()")
        || code.contains("Sys.getenv()")
        || (code.contains("/proc/") && code.contains("/environ"))
        || code.contains("Bun.env")
        || code.contains("Deno.env.toObject")
        || runs_env_command(code)
}

/// Code that runs `env`/`printenv` as a command: `os.system("env")`, `` `env` ``,
/// `subprocess.run(["printenv"])`, `do shell script "env"`.
fn runs_env_command(code: &str) -> bool {
    // `env`, `printenv`, `export -p` and `set`, each quoted three ways and in Perl's `qx()`.
    const RUNS: &[&str] = &[
        "\"env\"",
        "'env'",
        "`env`",
        "qx(env)",
        "\"printenv\"",
        "'printenv'",
        "`printenv`",
        "qx(printenv)",
        "\"export -p\"",
        "'export -p'",
        "`export -p`",
        "qx(export -p)",
        "\"set\"",
        "'set'",
        "`set`",
        "qx(set)",
    ];
    RUNS.iter().any(|run| code.contains(run))
}

fn ruby_env_dump(code: &str) -> bool {
    code.match_indices("ENV").any(|(i, m)| {
        let before = code[..i].chars().last();
        let after = &code[i + m.len()..];
        let boundary_before =
            before.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_' && c != '%' && c != '$');
        let next_ok = after
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_' && c != '[');
        boundary_before && next_ok && !after.starts_with(".fetch") && !after.starts_with(".key?")
    })
}

#[cfg(test)]
mod tests {
    use super::code_dumps_env;

    #[test]
    fn whole_environment_versus_one_value() {
        assert!(code_dumps_env("import os; print(dict(os.environ))"));
        assert!(code_dumps_env("console.log(process.env)"));
        assert!(code_dumps_env("print %ENV"));
        assert!(code_dumps_env("p ENV.to_h"));
        assert!(code_dumps_env("var_dump(getenv());"));
        assert!(!code_dumps_env("import os; print(os.environ['HOME'])"));
        assert!(!code_dumps_env("console.log(process.env.HOME)"));
        assert!(!code_dumps_env("puts ENV['HOME']"));
        assert!(!code_dumps_env("print(1)"));
        assert!(code_dumps_env("import os; os.system('env')"));
        assert!(code_dumps_env("print qx(printenv)"));
        assert!(code_dumps_env("system(\"export -p\")"));
        assert!(code_dumps_env("`set`"));
        assert!(!code_dumps_env("os.system('envoy')"));
    }
}
