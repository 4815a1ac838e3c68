//! A loaded frei0r plugin (its library, entry points and self-description) and its instances.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Frei0rError, Result};
use crate::ffi;

/// What a plugin does, from `f0r_plugin_info_t.plugin_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// One input, one output.
    Filter,
    /// No input, one output.
    Source,
    /// Two inputs.
    Mixer2,
    /// Three inputs.
    Mixer3,
}

impl PluginKind {
    /// `filter`, `source`, `mixer2` or `mixer3`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Filter => "filter",
            PluginKind::Source => "source",
            PluginKind::Mixer2 => "mixer2",
            PluginKind::Mixer3 => "mixer3",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The pixel layout a plugin works in, from `f0r_plugin_info_t.color_model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColorModel {
    /// Bytes B, G, R, A: the host swaps R and B around the plugin.
    Bgra8888,
    /// Bytes R, G, B, A: the engine's own layout, passed straight.
    Rgba8888,
    /// Any 4-byte layout (the plugin does not look at channels): passed straight.
    Packed32,
}

impl ColorModel {
    /// `BGRA8888`, `RGBA8888` or `PACKED32`.
    pub fn as_str(self) -> &'static str {
        match self {
            ColorModel::Bgra8888 => "BGRA8888",
            ColorModel::Rgba8888 => "RGBA8888",
            ColorModel::Packed32 => "PACKED32",
        }
    }
}

impl fmt::Display for ColorModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The type of one frei0r parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `F0R_PARAM_BOOL`.
    Bool,
    /// `F0R_PARAM_DOUBLE`.
    Double,
    /// `F0R_PARAM_COLOR`.
    Color,
    /// `F0R_PARAM_POSITION`.
    Position,
    /// `F0R_PARAM_STRING`.
    String,
}

impl ParamKind {
    fn from_c(t: c_int) -> Option<Self> {
        Some(match t {
            ffi::PARAM_BOOL => ParamKind::Bool,
            ffi::PARAM_DOUBLE => ParamKind::Double,
            ffi::PARAM_COLOR => ParamKind::Color,
            ffi::PARAM_POSITION => ParamKind::Position,
            ffi::PARAM_STRING => ParamKind::String,
            _ => return None,
        })
    }

    /// How the type is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            ParamKind::Bool => "a bool",
            ParamKind::Double => "a number",
            ParamKind::Color => "a colour r,g,b",
            ParamKind::Position => "a position x,y",
            ParamKind::String => "a string",
        }
    }
}

/// A value of a frei0r parameter, in the form the plugin takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// A bool (passed as a double, 1.0 or 0.0).
    Bool(bool),
    /// A double.
    Double(f64),
    /// A colour.
    Color([f32; 3]),
    /// A position.
    Position([f64; 2]),
    /// A string (no interior NUL).
    String(CString),
}

/// One parameter as the plugin describes it.
#[derive(Debug, Clone)]
pub struct Param {
    /// Its index for `f0r_set_param_value`.
    pub index: usize,
    /// The name the plugin gives it.
    pub name: String,
    /// The property name: lower case, spaces turned into `-` (made unique within the plugin).
    pub prop_name: String,
    /// Its type.
    pub kind: ParamKind,
    /// The plugin's explanation.
    pub explanation: String,
}

/// What `f0r_get_plugin_info` said.
#[derive(Debug, Clone)]
pub struct Info {
    /// The plugin's own name.
    pub name: String,
    /// Author.
    pub author: String,
    /// Filter, source or mixer.
    pub kind: PluginKind,
    /// Pixel layout.
    pub color_model: ColorModel,
    /// frei0r API version the plugin was written for.
    pub frei0r_version: i32,
    /// Plugin version, major.
    pub major_version: i32,
    /// Plugin version, minor.
    pub minor_version: i32,
    /// What it does.
    pub explanation: String,
}

/// A loaded, initialised frei0r plugin. The library stays loaded as long as this lives (instances
/// hold an `Arc` to it); it is never unloaded while any instance exists.
pub struct Plugin {
    api: ffi::Api,
    path: PathBuf,
    stem: String,
    crc32: u32,
    info: Info,
    params: Vec<Param>,
    // Last field: dropped after everything that may point into the library.
    _lib: libloading::Library,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("crc32", &format_args!("{:08x}", self.crc32))
            .field("info", &self.info)
            .field("params", &self.params)
            .finish()
    }
}

/// Copies a C string owned by the plugin, tolerating NULL and invalid UTF-8.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string that stays valid during the call.
unsafe fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: not NULL, and NUL-terminated and valid by the caller's contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// CRC-32 (IEEE) of the file at `path`: what identifies the build the probe measured
/// (`data/modes.tsv`). About 0.1 ms for a typical 40 KB plugin.
pub fn file_crc32(path: &Path) -> std::io::Result<u32> {
    Ok(crc32fast::hash(&std::fs::read(path)?))
}

/// `name` lower-cased with spaces turned into `-`.
pub fn prop_name(name: &str) -> String {
    name.trim().to_lowercase().replace(' ', "-")
}

/// Plugins loaded so far in this process, by path: each library is loaded and `f0r_init`ed once
/// and stays loaded for the program's life. The lock is also held while loading, so that no two
/// threads run a plugin's initialisation at once.
static LOADED: Mutex<Vec<Arc<Plugin>>> = Mutex::new(Vec::new());

/// Serialises `f0r_construct` and `f0r_destruct` across threads: some plugins (the C++ ones built
/// on frei0r.hpp) touch process-wide tables there. Taken when instances are made or dropped,
/// never per frame.
static CONSTRUCT: Mutex<()> = Mutex::new(());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Plugin {
    /// The plugin at `path`: loaded, checked, `f0r_init`ed and described on first use, then shared
    /// (the library is never unloaded). Any failure is [`Frei0rError::NotAPlugin`] with the
    /// reason.
    pub fn load(path: &Path) -> Result<Arc<Plugin>> {
        let mut loaded = lock(&LOADED);
        if let Some(p) = loaded.iter().find(|p| p.path == path) {
            return Ok(Arc::clone(p));
        }
        let plugin = Self::load_new(path)?;
        loaded.push(Arc::clone(&plugin));
        Ok(plugin)
    }

    fn load_new(path: &Path) -> Result<Arc<Plugin>> {
        let not = |reason: String| Frei0rError::NotAPlugin {
            path: path.to_path_buf(),
            reason,
        };
        // Read before loading: the bytes the table's verdict is about.
        let crc32 = file_crc32(path).map_err(|e| not(format!("cannot read it ({e})")))?;
        // SAFETY: loading a library runs its initialisers. The files come from the frei0r search
        // path, which the user controls; this is the same trust every frei0r host extends.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| not(format!("cannot load it ({e})")))?;
        // SAFETY: a library exporting these names is taken to be a frei0r plugin, whose symbols
        // have frei0r.h's signatures; `lib` is kept alive in the Plugin next to the pointers.
        let api = unsafe { ffi::Api::load(&lib) }.map_err(|s| not(format!("no symbol {s}")))?;
        // SAFETY: f0r_init takes no arguments; frei0r requires calling it once after loading.
        let rc = unsafe { (api.init)() };
        if rc == 0 {
            return Err(not("f0r_init failed".into()));
        }
        let mut ci = ffi::PluginInfo::default();
        // SAFETY: `ci` is a valid, writable f0r_plugin_info_t.
        unsafe { (api.get_plugin_info)(&mut ci) };
        let kind = match ci.plugin_type {
            ffi::PLUGIN_TYPE_FILTER => PluginKind::Filter,
            ffi::PLUGIN_TYPE_SOURCE => PluginKind::Source,
            ffi::PLUGIN_TYPE_MIXER2 => PluginKind::Mixer2,
            ffi::PLUGIN_TYPE_MIXER3 => PluginKind::Mixer3,
            t => return Err(not(format!("unknown plugin type {t}"))),
        };
        let color_model = match ci.color_model {
            ffi::COLOR_MODEL_BGRA8888 => ColorModel::Bgra8888,
            ffi::COLOR_MODEL_RGBA8888 => ColorModel::Rgba8888,
            ffi::COLOR_MODEL_PACKED32 => ColorModel::Packed32,
            c => return Err(not(format!("unknown colour model {c}"))),
        };
        // SAFETY: the plugin filled these with static strings (or left them NULL).
        let (name, author, explanation) =
            unsafe { (c_text(ci.name), c_text(ci.author), c_text(ci.explanation)) };
        let info = Info {
            name,
            author,
            kind,
            color_model,
            frei0r_version: ci.frei0r_version,
            major_version: ci.major_version,
            minor_version: ci.minor_version,
            explanation,
        };
        let n = ci.num_params.clamp(0, 1024) as usize;
        let mut params: Vec<Param> = Vec::with_capacity(n);
        for index in 0..n {
            let mut pi = ffi::ParamInfo::default();
            // SAFETY: `pi` is a valid f0r_param_info_t and `index` < num_params.
            unsafe { (api.get_param_info)(&mut pi, index as c_int) };
            let kind = ParamKind::from_c(pi.param_type).ok_or_else(|| {
                not(format!(
                    "parameter {index} has unknown type {}",
                    pi.param_type
                ))
            })?;
            // SAFETY: static strings from the plugin, or NULL.
            let (name, explanation) = unsafe { (c_text(pi.name), c_text(pi.explanation)) };
            let mut pn = prop_name(&name);
            if pn.is_empty() {
                pn = format!("param{index}");
            }
            if params.iter().any(|p| p.prop_name == pn) {
                pn = format!("{pn}-{index}");
            }
            params.push(Param {
                index,
                name,
                prop_name: pn,
                kind,
                explanation,
            });
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Arc::new(Plugin {
            api,
            path: path.to_path_buf(),
            stem,
            crc32,
            info,
            params,
            _lib: lib,
        }))
    }

    /// The plugin file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's stem (`glow` for `glow.so`): the element is called `frei0r-<stem>`.
    pub fn stem(&self) -> &str {
        &self.stem
    }

    /// CRC-32 of the plugin file, read when it was loaded ([`file_crc32`]).
    pub fn crc32(&self) -> u32 {
        self.crc32
    }

    /// What the plugin says about itself.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// Its parameters, in index order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Whether the plugin exports `f0r_update2`, which mixers need.
    pub fn has_update2(&self) -> bool {
        self.api.update2.is_some()
    }

    /// The parameter whose property name is `prop`.
    pub fn param(&self, prop: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.prop_name == prop)
    }
}

/// Whether frei0r can take `width` x `height` frames: both non-zero multiples of 8.
pub fn size_ok(width: u32, height: u32) -> bool {
    width > 0 && height > 0 && width.is_multiple_of(8) && height.is_multiple_of(8)
}

/// One instance of a plugin at a fixed frame size. Destroyed with `f0r_destruct` on drop.
pub struct Instance {
    plugin: Arc<Plugin>,
    handle: ffi::InstanceHandle,
    width: u32,
    height: u32,
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Instance({} {}x{})",
            self.plugin.stem, self.width, self.height
        )
    }
}

// SAFETY: a frei0r instance is a plain heap object of the plugin; frei0r lets different
// instances be used from different threads, and one instance is only ever used through
// `&mut Instance`, i.e. by one thread at a time.
unsafe impl Send for Instance {}

impl Instance {
    /// Constructs an instance for `width` x `height` frames (both multiples of 8).
    pub fn new(plugin: &Arc<Plugin>, width: u32, height: u32) -> Result<Self> {
        if !size_ok(width, height) {
            return Err(Frei0rError::BadSize { width, height });
        }
        let guard = lock(&CONSTRUCT);
        // SAFETY: f0r_init succeeded when the plugin was loaded; the size is valid for frei0r.
        let handle = unsafe { (plugin.api.construct)(width, height) };
        drop(guard);
        if handle.is_null() {
            return Err(Frei0rError::ConstructFailed {
                path: plugin.path.clone(),
                width,
                height,
            });
        }
        Ok(Instance {
            plugin: Arc::clone(plugin),
            handle,
            width,
            height,
        })
    }

    /// The plugin.
    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.plugin
    }

    /// Frame width.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Frame height.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Sets parameter `index` (an index of [`Plugin::params`]) to `value`, which must match the
    /// parameter's type.
    pub fn set_param(&mut self, index: usize, value: &ParamValue) -> Result<()> {
        let param = &self.plugin.params[index];
        let mismatch = || Frei0rError::BadParam {
            param: param.prop_name.clone(),
            expected: param.kind.describe(),
            value: format!("{value:?}"),
        };
        let idx = index as c_int;
        let set = self.plugin.api.set_param_value;
        match (param.kind, value) {
            (ParamKind::Bool, ParamValue::Bool(b)) => {
                let mut v: f64 = if *b { 1.0 } else { 0.0 };
                // SAFETY: a bool parameter takes a pointer to a double, valid for the call.
                unsafe { set(self.handle, (&mut v as *mut f64).cast(), idx) };
            }
            (ParamKind::Double, ParamValue::Double(x)) => {
                let mut v: f64 = *x;
                // SAFETY: a double parameter takes a pointer to a double, valid for the call.
                unsafe { set(self.handle, (&mut v as *mut f64).cast(), idx) };
            }
            (ParamKind::Color, ParamValue::Color([r, g, b])) => {
                let mut v = ffi::ParamColor {
                    r: *r,
                    g: *g,
                    b: *b,
                };
                // SAFETY: a colour parameter takes a pointer to f0r_param_color_t.
                unsafe { set(self.handle, (&mut v as *mut ffi::ParamColor).cast(), idx) };
            }
            (ParamKind::Position, ParamValue::Position([x, y])) => {
                let mut v = ffi::ParamPosition { x: *x, y: *y };
                // SAFETY: a position parameter takes a pointer to f0r_param_position_t.
                unsafe { set(self.handle, (&mut v as *mut ffi::ParamPosition).cast(), idx) };
            }
            (ParamKind::String, ParamValue::String(s)) => {
                let mut p: *const c_char = s.as_ptr();
                // SAFETY: a string parameter takes a pointer to a `char*`; the string is
                // NUL-terminated and lives for the call (plugins copy it).
                unsafe { set(self.handle, (&mut p as *mut *const c_char).cast(), idx) };
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    /// Reads parameter `index`'s current value.
    pub fn get_param(&self, index: usize) -> ParamValue {
        let param = &self.plugin.params[index];
        let idx = index as c_int;
        let get = self.plugin.api.get_param_value;
        match param.kind {
            ParamKind::Bool | ParamKind::Double => {
                let mut v: f64 = 0.0;
                // SAFETY: bool and double parameters write one double into the pointer.
                unsafe { get(self.handle, (&mut v as *mut f64).cast(), idx) };
                if param.kind == ParamKind::Bool {
                    ParamValue::Bool(v >= 0.5)
                } else {
                    ParamValue::Double(v)
                }
            }
            ParamKind::Color => {
                let mut v = ffi::ParamColor::default();
                // SAFETY: a colour parameter writes an f0r_param_color_t.
                unsafe { get(self.handle, (&mut v as *mut ffi::ParamColor).cast(), idx) };
                ParamValue::Color([v.r, v.g, v.b])
            }
            ParamKind::Position => {
                let mut v = ffi::ParamPosition::default();
                // SAFETY: a position parameter writes an f0r_param_position_t.
                unsafe { get(self.handle, (&mut v as *mut ffi::ParamPosition).cast(), idx) };
                ParamValue::Position([v.x, v.y])
            }
            ParamKind::String => {
                let mut p: *const c_char = std::ptr::null();
                // SAFETY: a string parameter writes a `char*` (owned by the instance) into the
                // pointer; we copy the text before anything else touches the instance.
                unsafe { get(self.handle, (&mut p as *mut *const c_char).cast(), idx) };
                // SAFETY: NULL or a NUL-terminated string owned by the live instance.
                let text = unsafe { c_text(p) };
                ParamValue::String(CString::new(text).unwrap_or_default())
            }
        }
    }

    /// Runs one frame: `input` is `None` for sources. Both buffers hold `width * height` pixels.
    ///
    /// # Panics
    /// If a buffer has the wrong length.
    pub fn update(&mut self, time: f64, input: Option<&[u32]>, output: &mut [u32]) {
        let n = self.width as usize * self.height as usize;
        assert_eq!(output.len(), n, "frei0r output buffer size");
        let inp: *const u32 = match input {
            Some(i) => {
                assert_eq!(i.len(), n, "frei0r input buffer size");
                i.as_ptr()
            }
            None => std::ptr::null(),
        };
        let api = &self.plugin.api;
        if let Some(update) = api.update {
            // SAFETY: both buffers hold width*height pixels as constructed (checked above); the
            // input is NULL only for sources, as frei0r specifies; `&mut self` makes the call
            // exclusive for this instance.
            unsafe { update(self.handle, time, inp, output.as_mut_ptr()) };
        } else if let Some(update2) = api.update2 {
            let null = std::ptr::null();
            // SAFETY: as above; the unused inputs of a filter or source are NULL.
            unsafe { update2(self.handle, time, inp, null, null, output.as_mut_ptr()) };
        }
    }

    /// Runs one frame of a mixer with `f0r_update2`: `inputs` holds two (mixer2) or three
    /// (mixer3) buffers; the third input pointer is NULL for a mixer2. Every buffer holds
    /// `width * height` pixels. Calls nothing when the plugin has no `f0r_update2` (the
    /// registry refuses such mixers, see [`Plugin::has_update2`]).
    ///
    /// # Panics
    /// If a buffer has the wrong length, or `inputs` holds fewer than 2 or more than 3 buffers.
    pub fn update2(&mut self, time: f64, inputs: &[&[u32]], output: &mut [u32]) {
        let n = self.width as usize * self.height as usize;
        assert_eq!(output.len(), n, "frei0r output buffer size");
        assert!(
            (2..=3).contains(&inputs.len()),
            "frei0r mixer inputs: {}",
            inputs.len()
        );
        for i in inputs {
            assert_eq!(i.len(), n, "frei0r input buffer size");
        }
        let in3: *const u32 = inputs.get(2).map_or(std::ptr::null(), |i| i.as_ptr());
        if let Some(update2) = self.plugin.api.update2 {
            // SAFETY: every buffer holds width*height pixels as constructed (checked above); the
            // third input is NULL only for two inputs (a mixer2), as frei0r specifies; `&mut
            // self` makes the call exclusive for this instance.
            unsafe {
                update2(
                    self.handle,
                    time,
                    inputs[0].as_ptr(),
                    inputs[1].as_ptr(),
                    in3,
                    output.as_mut_ptr(),
                )
            };
        }
    }

    /// The raw handle (for diagnostics).
    pub fn handle(&self) -> *mut c_void {
        self.handle
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _guard = lock(&CONSTRUCT);
        // SAFETY: the handle came from f0r_construct of this plugin and is destroyed once; the
        // library is still loaded because we hold an Arc to the plugin.
        unsafe { (self.plugin.api.destruct)(self.handle) };
    }
}
