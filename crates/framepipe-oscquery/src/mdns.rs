//! The mDNS (DNS-SD) advert: `_oscjson._tcp` for the OSCQuery server and `_osc._udp` for the
//! OSC port, so that TouchOSC, Open Stage Control or Chataigne find the show by themselves.
//! Best effort: a machine without multicast gets a note, never an error that stops the run.
//! The advert answers on the interfaces of the address served: loopback only for a loopback
//! server (other programs on this machine see it), every interface for `0.0.0.0`.

use std::net::{IpAddr, SocketAddr};

use mdns_sd::{ServiceDaemon, ServiceInfo};

use crate::server::HostInfo;

/// The OSCQuery service type.
pub const OSCJSON: &str = "_oscjson._tcp.local.";
/// The OSC service type.
pub const OSC_UDP: &str = "_osc._udp.local.";

/// A registered advert; [`Advert::withdraw`] says goodbye and stops the daemon.
pub struct Advert {
    daemon: ServiceDaemon,
    names: Vec<String>,
}

impl std::fmt::Debug for Advert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Advert")
            .field("names", &self.names)
            .finish()
    }
}

/// This machine's host name (for the advert's `<host>.local.`).
fn host_name() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let h: String = h
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if h.is_empty() {
        "framepipe".into()
    } else {
        h
    }
}

fn info(ty: &str, name: &str, ip: IpAddr, port: u16) -> mdns_sd::Result<ServiceInfo> {
    let host = format!("{}.local.", host_name());
    if ip.is_unspecified() {
        ServiceInfo::new(
            ty,
            name,
            &host,
            "",
            port,
            None::<std::collections::HashMap<String, String>>,
        )
        .map(ServiceInfo::enable_addr_auto)
    } else {
        ServiceInfo::new(
            ty,
            name,
            &host,
            ip,
            port,
            None::<std::collections::HashMap<String, String>>,
        )
    }
}

impl Advert {
    /// Advertises the server at `http` (and `info.osc`); returns the advert and a line saying
    /// what was advertised.
    pub fn start(info: &HostInfo, http: SocketAddr) -> mdns_sd::Result<(Advert, String)> {
        let daemon = ServiceDaemon::new()?;
        let mut names = Vec::new();
        let query = self::info(OSCJSON, &info.name, http.ip(), http.port())?;
        names.push(query.get_fullname().to_string());
        daemon.register(query)?;
        let mut note = format!(
            "mDNS: advertising {} '{}' on port {}",
            OSCJSON.trim_end_matches(".local."),
            info.name,
            http.port()
        );
        if let Some(osc) = info.osc {
            let udp = self::info(OSC_UDP, &info.name, osc.ip(), osc.port())?;
            names.push(udp.get_fullname().to_string());
            daemon.register(udp)?;
            note.push_str(&format!(
                " and {} on port {}",
                OSC_UDP.trim_end_matches(".local."),
                osc.port()
            ));
        }
        if http.ip().is_loopback() {
            note.push_str(" (loopback: this machine only)");
        }
        Ok((Advert { daemon, names }, note))
    }

    /// Unregisters (a goodbye packet, waited for at most 200 ms) and stops the daemon.
    pub fn withdraw(self) {
        for n in &self.names {
            if let Ok(rx) = self.daemon.unregister(n) {
                let _ = rx.recv_timeout(std::time::Duration::from_millis(200));
            }
        }
        let _ = self.daemon.shutdown();
    }
}
