//! The `airlock` binary: reads its environment once into [`airlock_kernel::Settings`] and runs
//! the command line ([`airlock::cli`]); re-run with a marker argument, it is a warm sandbox host.

fn main() {
    // A warm sandbox host is this same executable re-run with a marker argument.
    if let Some(code) = airlock_sandbox::host::main_hook() {
        std::process::exit(code);
    }
    // The operator's sandbox switches (AIRLOCK_SANDBOX_*), read once here.
    airlock_sandbox::settings::install(airlock_sandbox::SandboxSettings::from_vars(
        |n| std::env::var_os(n),
        std::env::vars_os(),
    ));
    if let Ok(exe) = std::env::current_exe() {
        airlock_sandbox::host::enable(exe);
    }
    // The environment is read here, once; everything below gets it as settings.
    let settings = airlock::cli::settings_from_env();
    std::process::exit(airlock::cli::main(settings));
}
