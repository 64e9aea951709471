//! The hardening suite of preloop-hooks lives in `tests/` (see
//! `docs/hardening.md`): fuzzed stdin for every hook binary, a hostile
//! server, crashes at every step of a delivery, concurrency, disk faults,
//! secrets and frame injection. This library is empty on purpose.
