//! The Linux-specific parts of kscale. Everything that needs `unsafe` or reads
//! kernel interfaces lives here, so the other crates stay portable and safe.

pub mod affinity;
pub mod fsinfo;
pub mod guest;
pub mod idle;
pub mod initramfs;
pub mod kallsyms;
pub mod linetrip;
pub mod perf;
pub mod process;
pub mod procstat;
pub mod settings;
pub mod snapshot;
pub mod threads;
pub mod topology;
