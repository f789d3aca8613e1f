//! The platform layer: everything of the library that talks to the operating system below std —
//! pipes and raw reads and writes, polls, socket peeks, process groups, pidfds, the parent-death
//! signal, SIGPIPE, `/proc/self/fd`, stack bounds, the password database, the loader — and files
//! handled so that none can hang or corrupt anything ([`fs`]). No module outside this one names
//! `libc`.
//!
//! It is written over [rustix](https://docs.rs/rustix) (safe, typed system calls; raw syscalls on
//! Linux, no libc in between), and over libc only where rustix has no safe call for a library:
//! signal dispositions ([`signal`]), pthread stack bounds ([`thread`]), `getpwuid_r` ([`user`]),
//! `dladdr` ([`dl`]), `pthread_atfork` ([`fork`]), and `fork`/`_exit` (tests and the child side of
//! a spawn).
//!
//! **Linux is the supported platform.** The library builds, and its tests run, on Linux only
//! (glibc or musl, kernel 4.x; a pidfd needs 5.3, and without one a thread waits for each server
//! instead). What a port to macOS (or a BSD) would need, all of it here or named from here:
//! - `process::die_with_parent`: `PR_SET_PDEATHSIG` is Linux's; macOS would watch the parent with
//!   a kqueue `EVFILT_PROC` in a helper, or accept that a killed host leaves servers behind.
//! - `process::pidfd`: a kqueue `EVFILT_PROC`/`NOTE_EXIT` instead (the fallback thread works as
//!   it is).
//! - `fd::ProcPath`: no `/proc`; the stdio transport's blocking reads (`transport/stdio_wake.rs`)
//!   would be switched off, and the reader polls, as it does when `/proc` is not mounted.
//! - `process::on_main_thread`: `pthread_main_np`.
//! - `thread::stack_bounds`: `pthread_get_stackaddr_np` and `pthread_get_stacksize_np`.
//! - `dl::own_file`: `dladdr` exists; the companion library's name is `libmcplug_schema.dylib`
//!   (`std::env::consts` gives it), and the bindings would look for `.dylib` files.
//! - the rest (poll, pipes, fcntl, flock, recv, signals) is POSIX and rustix covers it there.

pub(crate) mod dl;
pub(crate) mod fd;
pub(crate) mod fork;
pub(crate) mod fs;
pub(crate) mod net;
pub(crate) mod process;
pub(crate) mod signal;
pub(crate) mod thread;
pub(crate) mod user;
