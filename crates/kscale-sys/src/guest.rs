//! What kscale does as init (PID 1) of a guest `kscale vm` booted: the
//! file systems a run reads and writes, the loopback interface the `ipc`
//! and macro families talk over, a raw serial line to send results on,
//! and the power-off that ends QEMU. Nothing here runs on the host.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

fn cstr(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{s:?}: a NUL byte"))
}

fn mount_one(source: &str, target: &str, fstype: &str, data: &str) -> Result<(), String> {
    let _ = std::fs::create_dir_all(target);
    let (s, t, f, d) = (cstr(source)?, cstr(target)?, cstr(fstype)?, cstr(data)?);
    // SAFETY: every pointer is a NUL-terminated string alive across the call.
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            f.as_ptr(),
            0,
            d.as_ptr() as *const libc::c_void,
        )
    };
    if rc != 0 {
        return Err(format!(
            "mount {fstype} on {target}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// /proc, /sys, /dev (devtmpfs: the serial ports' nodes), /dev/shm, /tmp
/// and /run: what a run and its workloads expect of a machine.
pub fn mount_basics() -> Result<(), String> {
    mount_one("proc", "/proc", "proc", "")?;
    mount_one("sysfs", "/sys", "sysfs", "")?;
    mount_one("devtmpfs", "/dev", "devtmpfs", "")?;
    mount_one("tmpfs", "/dev/shm", "tmpfs", "mode=1777")?;
    mount_one("tmpfs", "/tmp", "tmpfs", "mode=1777")?;
    mount_one("tmpfs", "/run", "tmpfs", "mode=755")
}

/// Brings `lo` up: a fresh network namespace has it down, and the
/// loopback workloads connect to 127.0.0.1.
pub fn loopback_up() -> Result<(), String> {
    // SAFETY: socket() takes integers; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    let sock = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // SAFETY: the ioctls read and write the ifreq we own, on our socket.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(format!(
                "SIOCGIFFLAGS lo: {}",
                std::io::Error::last_os_error()
            ));
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(format!(
                "SIOCSIFFLAGS lo: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

pub fn set_hostname(name: &str) -> Result<(), String> {
    nix::unistd::sethostname(name).map_err(|e| format!("sethostname {name}: {e}"))
}

/// A serial port opened for writing bytes as they are: no `\n` → `\r\n`,
/// no echo, no flow control, so that JSON arrives on the host unchanged.
pub fn raw_serial(path: &str) -> Result<File, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: termios is plain data, filled by tcgetattr before use.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and `t` lives across the calls.
    unsafe {
        if libc::tcgetattr(f.as_raw_fd(), &mut t) != 0 {
            return Err(format!(
                "{path}: not a terminal: {}",
                std::io::Error::last_os_error()
            ));
        }
        libc::cfmakeraw(&mut t);
        if libc::tcsetattr(f.as_raw_fd(), libc::TCSANOW, &t) != 0 {
            return Err(format!("{path}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(f)
}

/// Waits until everything written to the serial port `f` has left it.
pub fn drain(f: &File) {
    // SAFETY: the descriptor is open for the call.
    unsafe {
        libc::tcdrain(f.as_raw_fd());
    }
}

/// Syncs and powers the machine off; QEMU then exits. Returns only if
/// the kernel refused.
pub fn power_off() -> String {
    // SAFETY: sync and reboot take no pointers.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    format!("power off: {}", std::io::Error::last_os_error())
}
