mod cli_install;
mod cli_local;
mod cli_operator;
mod cli_server;
mod codex_trust;
mod install_files;
mod lineage;
mod term_safety;
