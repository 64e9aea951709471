//! The one test binary of the hardening suite (`autotests = false`; see
//! docs/hardening.md): the suites under `suite/`, the hook table and checks
//! in `common/` (generic helpers in `preloop_testkit::support`).

mod common;
mod suite;
