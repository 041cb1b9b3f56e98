//! What several families use and none owns. A family imports from here and
//! from the crate root, never from another family's module, so each family
//! folder reads on its own (a test in tests/layout.rs holds that).
//!
//! - [`child`]: forked helper processes that die with the worker.
//! - [`fd`]: whole-buffer reads and writes on raw descriptors, poll.
//! - [`buf`]: page-aligned buffers and mappings.
//! - [`scratch`]: names and files in the run's scratch directory.
//! - [`place`]: the `place` param, pinning a pair or ring.
//! - [`sock`]: sockets bound, tuned and dialled as netperf does.
//! - [`epoll`]: the one epoll wrapper.
//! - [`exec`]: the helper program and async-signal-safe fork-and-wait.

pub mod buf;
pub mod child;
pub mod epoll;
pub mod exec;
pub mod fd;
pub mod place;
pub mod scratch;
pub mod sock;
