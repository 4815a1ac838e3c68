//! Without an EGL library, opening the context fails with a message that names the Debian
//! packages to install. Its own test binary: it sets the environment before anything reads it.

use framepipe_gpu::{Gpu, GpuError};

#[test]
fn without_egl_the_error_names_the_packages_to_install() {
    std::env::set_var("FRAMEPIPE_EGL_LIB", "/nonexistent/libEGL.so.1");
    let err = Gpu::open().expect_err("no EGL library at that path");
    assert!(matches!(err, GpuError::LoadEgl { .. }), "{err:?}");
    let message = err.to_string();
    for needle in [
        "/nonexistent/libEGL.so.1",
        "libegl1",
        "libegl-mesa0",
        "libgl1-mesa-dri",
        "FRAMEPIPE_EGL_LIB",
    ] {
        assert!(
            message.contains(needle),
            "{needle:?} missing from: {message}"
        );
    }
}
