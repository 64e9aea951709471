//! The integration-test binary of preloop-shared: the engine's delivery
//! rules through `Engine::with_backend` (testkit's in-memory backend and the
//! real local inbox), and the engine-level regressions of issue 12.

mod suite;
