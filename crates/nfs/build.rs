//! Links libnfs, the C library fio's `nfs` engine uses. Debian 12 ships 4.0
//! (`libnfs-dev`); the declarations in src/ffi.rs are that version's.

fn main() {
    match pkg_config::Config::new().atleast_version("4.0").probe("libnfs") {
        Ok(lib) if lib.version.starts_with("4.") => {}
        Ok(lib) => panic!(
            "libnfs {} is installed; dc-nfs declares the calls of libnfs 4 (Debian 12's) and was \
             not checked against another version's header",
            lib.version
        ),
        Err(e) => panic!("libnfs not found ({e}); install it: apt-get install libnfs-dev (scripts/setup.sh does)"),
    }
}
