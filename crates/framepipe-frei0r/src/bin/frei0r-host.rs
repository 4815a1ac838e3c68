//! The host of isolated frei0r plugins, for programs that cannot serve as their own host (test
//! binaries; `framepipe` itself serves, see `framepipe_frei0r::isolate`). Run by the parent with
//! `__frei0r-host PLUGIN WIDTH HEIGHT INPUTS CLEAR_OUTPUT PPID FD`; not meant to be run by hand.

fn main() {
    match framepipe_frei0r::isolate::host_main_if_asked() {
        Some(code) => std::process::exit(code),
        None => {
            eprintln!(
                "frei0r-host: run by framepipe for isolated plugins (first argument {}), not by hand",
                framepipe_frei0r::isolate::HOST_ARG
            );
            std::process::exit(2);
        }
    }
}
