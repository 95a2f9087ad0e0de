//! What the library calls of Python and JavaScript do, by qualified name. A name matches an
//! entry exactly, or an entry ending in `*` by prefix (`subprocess.*`, `os.exec*`); the exact
//! or longest entry wins, so `os.environ.get` (one variable) overrides `os.environ` (all of
//! them) and `os.environ.*` (setting one is inert).

use std::collections::HashMap;
use std::sync::OnceLock;

/// What a call (or, for a reference that is not called, what handing the function on) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    /// Argument 0 is a shell command line.
    Shell,
    /// Argument 0 is an argument vector, or a program whose arguments are argument 1.
    Spawn,
    /// [`Api::Spawn`], or [`Api::Shell`] when given `shell=True` / `{shell: true}`.
    SpawnOrShell,
    /// Other process control: the command it runs cannot be seen.
    Process,
    /// Forks the interpreter.
    Fork,
    /// Sends a signal to the process id in argument 0.
    Signal,
    /// Network access.
    Network,
    /// Opens the path in argument 0 with the mode or flags in argument 1.
    Open,
    /// Reads the path in this argument.
    Read(usize),
    /// Writes the path in this argument (argument 1 when it is known is the content).
    Write(usize),
    /// Deletes the path in argument 0, recursively when `true`.
    Remove(bool),
    /// The whole environment.
    EnvAll,
    /// The environment variable named by argument 0.
    EnvGet,
    /// Argument 0 is code in the same language.
    Eval,
    /// Runs code the call's arguments do not show (`runpy`, `vm`, `code.interact`).
    Dynamic,
    /// Argument 0 names a module to load.
    Import,
    /// Native code.
    Native,
    /// Nothing the guard judges (overrides a broader entry).
    Inert,
}

/// Methods judged on any receiver: the path is the receiver's (`Path(p).write_text(…)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    Read,
    Write,
    Remove,
}

const PYTHON: &[(&str, Api)] = &[
    ("os.system", Api::Shell),
    ("os.popen", Api::Shell),
    ("subprocess.getoutput", Api::Shell),
    ("subprocess.getstatusoutput", Api::Shell),
    ("commands.*", Api::Shell),
    ("asyncio.create_subprocess_shell", Api::Shell),
    ("subprocess.run", Api::SpawnOrShell),
    ("subprocess.call", Api::SpawnOrShell),
    ("subprocess.check_call", Api::SpawnOrShell),
    ("subprocess.check_output", Api::SpawnOrShell),
    ("subprocess.Popen", Api::SpawnOrShell),
    ("subprocess.*", Api::Process),
    ("os.exec*", Api::Spawn),
    ("os.spawn*", Api::Spawn),
    ("os.posix_spawn*", Api::Spawn),
    ("pty.spawn", Api::Spawn),
    ("asyncio.create_subprocess_exec", Api::Spawn),
    ("multiprocessing.*", Api::Process),
    ("os.fork", Api::Fork),
    ("os.forkpty", Api::Fork),
    ("pty.fork", Api::Fork),
    ("os.kill", Api::Signal),
    ("os.killpg", Api::Signal),
    ("socket.*", Api::Network),
    ("socketserver.*", Api::Network),
    ("ssl.*", Api::Network),
    ("urllib.request.*", Api::Network),
    ("urllib.urlopen", Api::Network),
    ("urllib.urlretrieve", Api::Network),
    ("urllib2.*", Api::Network),
    ("urllib3.*", Api::Network),
    ("requests.*", Api::Network),
    ("httpx.*", Api::Network),
    ("aiohttp.*", Api::Network),
    ("http.client.*", Api::Network),
    ("http.server.*", Api::Network),
    ("httplib.*", Api::Network),
    ("ftplib.*", Api::Network),
    ("smtplib.*", Api::Network),
    ("poplib.*", Api::Network),
    ("imaplib.*", Api::Network),
    ("telnetlib.*", Api::Network),
    ("xmlrpc.client.*", Api::Network),
    ("paramiko.*", Api::Network),
    ("websocket.*", Api::Network),
    ("websockets.*", Api::Network),
    ("asyncio.open_connection", Api::Network),
    ("open", Api::Open),
    ("io.open", Api::Open),
    ("codecs.open", Api::Open),
    ("builtins.open", Api::Open),
    ("os.open", Api::Write(0)),
    ("os.remove", Api::Remove(false)),
    ("os.unlink", Api::Remove(false)),
    ("os.rmdir", Api::Remove(false)),
    ("os.removedirs", Api::Remove(true)),
    ("shutil.rmtree", Api::Remove(true)),
    ("os.rename", Api::Write(1)),
    ("os.renames", Api::Write(1)),
    ("os.replace", Api::Write(1)),
    ("os.symlink", Api::Write(1)),
    ("os.link", Api::Write(1)),
    ("os.mkdir", Api::Write(0)),
    ("os.makedirs", Api::Write(0)),
    ("os.mkfifo", Api::Write(0)),
    ("os.chmod", Api::Write(0)),
    ("os.lchmod", Api::Write(0)),
    ("os.chown", Api::Write(0)),
    ("os.lchown", Api::Write(0)),
    ("os.truncate", Api::Write(0)),
    ("os.utime", Api::Write(0)),
    ("shutil.copy*", Api::Write(1)),
    ("shutil.move", Api::Write(1)),
    ("shutil.chown", Api::Write(0)),
    ("shutil.make_archive", Api::Write(0)),
    ("shutil.unpack_archive", Api::Write(1)),
    ("os.environ", Api::EnvAll),
    ("os.environb", Api::EnvAll),
    ("os.environ.*", Api::Inert),
    ("os.environ.copy", Api::EnvAll),
    ("os.environ.items", Api::EnvAll),
    ("os.environ.values", Api::EnvAll),
    ("os.environ.get", Api::EnvGet),
    ("os.environ.__getitem__", Api::EnvGet),
    ("os.environb.get", Api::EnvGet),
    ("os.getenv", Api::EnvGet),
    ("os.getenvb", Api::EnvGet),
    ("eval", Api::Eval),
    ("exec", Api::Eval),
    ("compile", Api::Eval),
    ("builtins.eval", Api::Eval),
    ("builtins.exec", Api::Eval),
    ("builtins.compile", Api::Eval),
    ("runpy.*", Api::Dynamic),
    ("vars", Api::Dynamic),
    ("globals", Api::Dynamic),
    ("locals", Api::Dynamic),
    ("code.*", Api::Dynamic),
    ("codeop.*", Api::Dynamic),
    ("pickle.load*", Api::Dynamic),
    ("marshal.load*", Api::Dynamic),
    ("__import__", Api::Import),
    ("builtins.__import__", Api::Import),
    ("importlib.import_module", Api::Import),
    ("importlib.__import__", Api::Import),
    ("ctypes.*", Api::Native),
    ("_ctypes.*", Api::Native),
    ("cffi.*", Api::Native),
];

const PYTHON_METHODS: &[(&str, Method)] = &[
    ("read_text", Method::Read),
    ("read_bytes", Method::Read),
    ("write_text", Method::Write),
    ("write_bytes", Method::Write),
    ("touch", Method::Write),
    ("mkdir", Method::Write),
    ("rename", Method::Write),
    ("replace", Method::Write),
    ("symlink_to", Method::Write),
    ("hardlink_to", Method::Write),
    ("chmod", Method::Write),
    ("unlink", Method::Remove),
    ("rmdir", Method::Remove),
];

const JAVASCRIPT: &[(&str, Api)] = &[
    ("child_process.exec", Api::Shell),
    ("child_process.execSync", Api::Shell),
    ("child_process.spawn", Api::SpawnOrShell),
    ("child_process.spawnSync", Api::SpawnOrShell),
    ("child_process.execFile", Api::Spawn),
    ("child_process.execFileSync", Api::Spawn),
    ("child_process.*", Api::Process),
    ("cluster.*", Api::Process),
    ("worker_threads.*", Api::Process),
    ("Bun.spawn", Api::Spawn),
    ("Bun.spawnSync", Api::Spawn),
    ("Bun.$", Api::Shell),
    ("Deno.Command", Api::Spawn),
    ("Deno.run", Api::Process),
    ("process.kill", Api::Signal),
    ("process.dlopen", Api::Native),
    ("process.binding", Api::Native),
    ("process._linkedBinding", Api::Native),
    ("process.env", Api::EnvAll),
    ("process.env.*", Api::EnvGet),
    ("Deno.env.toObject", Api::EnvAll),
    ("Deno.env.get", Api::EnvGet),
    ("Bun.env", Api::EnvAll),
    ("Bun.env.*", Api::EnvGet),
    ("fetch", Api::Network),
    ("XMLHttpRequest", Api::Network),
    ("WebSocket", Api::Network),
    ("EventSource", Api::Network),
    ("http.*", Api::Network),
    ("https.*", Api::Network),
    ("http2.*", Api::Network),
    ("net.*", Api::Network),
    ("tls.*", Api::Network),
    ("dgram.*", Api::Network),
    ("dns.*", Api::Network),
    ("axios", Api::Network),
    ("axios.*", Api::Network),
    ("node-fetch", Api::Network),
    ("node-fetch.*", Api::Network),
    ("undici.*", Api::Network),
    ("Deno.connect*", Api::Network),
    ("Deno.listen*", Api::Network),
    ("Deno.serve", Api::Network),
    ("Bun.connect", Api::Network),
    ("Bun.listen", Api::Network),
    ("Bun.serve", Api::Network),
    ("fs.open", Api::Open),
    ("fs.openSync", Api::Open),
    ("fs.readFile", Api::Read(0)),
    ("fs.readFileSync", Api::Read(0)),
    ("fs.createReadStream", Api::Read(0)),
    ("fs.writeFile", Api::Write(0)),
    ("fs.writeFileSync", Api::Write(0)),
    ("fs.appendFile", Api::Write(0)),
    ("fs.appendFileSync", Api::Write(0)),
    ("fs.createWriteStream", Api::Write(0)),
    ("fs.mkdir", Api::Write(0)),
    ("fs.mkdirSync", Api::Write(0)),
    ("fs.chmod", Api::Write(0)),
    ("fs.chmodSync", Api::Write(0)),
    ("fs.chown", Api::Write(0)),
    ("fs.chownSync", Api::Write(0)),
    ("fs.truncate", Api::Write(0)),
    ("fs.truncateSync", Api::Write(0)),
    ("fs.utimes", Api::Write(0)),
    ("fs.utimesSync", Api::Write(0)),
    ("fs.rename", Api::Write(1)),
    ("fs.renameSync", Api::Write(1)),
    ("fs.copyFile", Api::Write(1)),
    ("fs.copyFileSync", Api::Write(1)),
    ("fs.cp", Api::Write(1)),
    ("fs.cpSync", Api::Write(1)),
    ("fs.symlink", Api::Write(1)),
    ("fs.symlinkSync", Api::Write(1)),
    ("fs.link", Api::Write(1)),
    ("fs.linkSync", Api::Write(1)),
    ("fs.rm", Api::Remove(true)),
    ("fs.rmSync", Api::Remove(true)),
    ("fs.rmdir", Api::Remove(true)),
    ("fs.rmdirSync", Api::Remove(true)),
    ("fs.unlink", Api::Remove(false)),
    ("fs.unlinkSync", Api::Remove(false)),
    ("Deno.writeTextFile", Api::Write(0)),
    ("Deno.writeFile", Api::Write(0)),
    ("Deno.readTextFile", Api::Read(0)),
    ("Deno.readFile", Api::Read(0)),
    ("Deno.remove", Api::Remove(true)),
    ("Bun.write", Api::Write(0)),
    ("Bun.file", Api::Read(0)),
    ("eval", Api::Eval),
    ("Function", Api::Eval),
    ("vm.*", Api::Dynamic),
    ("module.*", Api::Dynamic),
    ("require", Api::Import),
    ("import", Api::Import),
];

/// A table indexed for [`Index::lookup`]: its exact entries by name (the first of a name
/// wins) and its `prefix*` entries in table order. The walkers look a name up for every call
/// and reference, so the table is not scanned each time.
struct Index {
    exact: HashMap<&'static str, Api>,
    prefixes: Vec<(&'static str, Api)>,
}

impl Index {
    fn new(table: &[(&'static str, Api)]) -> Index {
        let mut exact = HashMap::new();
        let mut prefixes = Vec::new();
        for &(pattern, api) in table {
            match pattern.strip_suffix('*') {
                Some(prefix) => prefixes.push((prefix, api)),
                None => {
                    exact.entry(pattern).or_insert(api);
                }
            }
        }
        Index { exact, prefixes }
    }

    /// Look `name` up: the exact entry, else the longest `prefix*` entry (the first of that
    /// length). A method of a call's result (`socket.socket().connect`) is not a module
    /// function: the call that made the object was judged.
    fn lookup(&self, name: &str) -> Option<Api> {
        if name.contains("()") {
            return None;
        }
        if let Some(api) = self.exact.get(name) {
            return Some(*api);
        }
        let mut best: Option<(usize, Api)> = None;
        for &(prefix, api) in &self.prefixes {
            if name.starts_with(prefix) && best.is_none_or(|(len, _)| prefix.len() > len) {
                best = Some((prefix.len(), api));
            }
        }
        best.map(|(_, api)| api)
    }
}

/// What calling the Python function `name` does.
pub(super) fn python(name: &str) -> Option<Api> {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| Index::new(PYTHON)).lookup(name)
}

/// What calling the JavaScript function `name` does (module names without `node:`).
pub(super) fn javascript(name: &str) -> Option<Api> {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| Index::new(JAVASCRIPT)).lookup(name)
}

/// A Python method judged on whatever receiver it is called on.
pub(super) fn python_method(name: &str) -> Option<Method> {
    PYTHON_METHODS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, m)| *m)
}
