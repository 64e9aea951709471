//! The one integration-test binary of preloop-hooks (`autotests = false`):
//! the suites under `suite/`, the helpers in `common/` (generic ones in
//! `preloop_testkit::support`).

mod common;
mod suite;
