//! The displays (monitors) a window can go to: XRandR 1.5 monitors of the X server in
//! `$DISPLAY`, as `xrandr --listmonitors` shows them.
//!
//! RandR *monitors* rather than winit's monitor handles: winit lists CRTCs, which misses the
//! monitors a user defines with `xrandr --setmonitor` (one wide output split in two for two
//! projectors behind a splitter, or a virtual screen as in the tests), while RandR's monitor
//! list has both, with the names users see.

use x11rb::connection::Connection;
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::xproto::ConnectionExt as _;

use crate::{Result, WindowError};

/// One display: where a window can be placed or go full screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Display {
    /// Its position in the list, from 0 (the order of XRandR's monitor list).
    pub index: usize,
    /// Its name (`HDMI-1`, `screen`, or a name given to `xrandr --setmonitor`).
    pub name: String,
    /// Left edge on the X screen, pixels.
    pub x: i32,
    /// Top edge.
    pub y: i32,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The primary display.
    pub primary: bool,
}

impl std::fmt::Display for Display {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} '{}' {}x{}+{}+{}{}",
            self.index,
            self.name,
            self.width,
            self.height,
            self.x,
            self.y,
            if self.primary { " (primary)" } else { "" }
        )
    }
}

/// The X display named by `$DISPLAY`, or [`WindowError::NoDisplay`].
pub fn display_name() -> Result<String> {
    match std::env::var("DISPLAY") {
        Ok(d) if !d.is_empty() => Ok(d),
        _ => Err(WindowError::NoDisplay),
    }
}

/// Every display of the X server in `$DISPLAY`, in XRandR's order.
pub fn displays() -> Result<Vec<Display>> {
    let name = display_name()?;
    let (conn, screen) = x11rb::connect(Some(&name)).map_err(|e| WindowError::Connect {
        display: name.clone(),
        reason: e.to_string(),
    })?;
    let randr = |e: &dyn std::fmt::Display| WindowError::Randr {
        display: name.clone(),
        reason: e.to_string(),
    };
    let root = conn.setup().roots[screen].root;
    let reply = conn
        .randr_get_monitors(root, true)
        .map_err(|e| randr(&e))?
        .reply()
        .map_err(|e| randr(&e))?;
    let mut list = Vec::with_capacity(reply.monitors.len());
    for (index, m) in reply.monitors.iter().enumerate() {
        let name = match conn.get_atom_name(m.name).map(|c| c.reply()) {
            Ok(Ok(a)) => String::from_utf8_lossy(&a.name).into_owned(),
            _ => format!("monitor-{index}"),
        };
        list.push(Display {
            index,
            name,
            x: i32::from(m.x),
            y: i32::from(m.y),
            width: u32::from(m.width),
            height: u32::from(m.height),
            primary: m.primary,
        });
    }
    if list.is_empty() {
        // No RandR monitor (an X server without outputs): the whole screen is the display.
        let s = &conn.setup().roots[screen];
        list.push(Display {
            index: 0,
            name: "screen".into(),
            x: 0,
            y: 0,
            width: u32::from(s.width_in_pixels),
            height: u32::from(s.height_in_pixels),
            primary: true,
        });
    }
    Ok(list)
}

/// The display `spec` names in `list`: an index (`1`), a name (`HDMI-1`), or empty for the
/// primary one (the first if none is primary).
pub fn choose<'a>(list: &'a [Display], spec: &str) -> Result<&'a Display> {
    let spec = spec.trim();
    let found = if spec.is_empty() {
        list.iter().find(|d| d.primary).or_else(|| list.first())
    } else if let Ok(i) = spec.parse::<usize>() {
        list.get(i)
    } else {
        list.iter().find(|d| d.name == spec)
    };
    found.ok_or_else(|| WindowError::UnknownDisplay {
        given: spec.to_string(),
        expected: list
            .iter()
            .map(|d| format!("{} ({})", d.index, d.name))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(index: usize, name: &str, primary: bool) -> Display {
        Display {
            index,
            name: name.into(),
            x: index as i32 * 100,
            y: 0,
            width: 100,
            height: 50,
            primary,
        }
    }

    #[test]
    fn displays_are_chosen_by_index_name_or_primary() {
        let list = [d(0, "left", false), d(1, "right", true)];
        assert_eq!(choose(&list, "").unwrap().name, "right");
        assert_eq!(choose(&list, "0").unwrap().name, "left");
        assert_eq!(choose(&list, "right").unwrap().index, 1);
        let e = choose(&list, "2").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown display '2'; expected one of: 0 (left), 1 (right) (see 'framepipe displays')"
        );
        assert!(choose(&list, "HDMI-9").is_err());
        // No primary: the first.
        assert_eq!(choose(&[d(0, "a", false)], "").unwrap().name, "a");
    }
}
