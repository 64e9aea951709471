//! `preloop-hooks`: see the crate docs of `preloop_hooks`.
fn main() -> std::process::ExitCode {
    preloop_hooks::cli::main()
}
