//! The one integration-test binary of preloop-opencode (`autotests = false`):
//! the suites under `suite/`, the helpers in `common/`.

mod common;
mod suite;
