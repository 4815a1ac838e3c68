//! The frei0r 1.x C API (frei0r.h), declared by hand, and the table of a plugin's entry points.
//!
//! Layouts follow frei0r.h: `f0r_plugin_info_t`, `f0r_param_info_t`, the parameter value types
//! (`f0r_param_bool` and `f0r_param_double` are C doubles, a colour is three floats, a position two
//! doubles, a string a `char*`), and the function signatures.

use std::ffi::{c_char, c_double, c_int, c_uint, c_void};

/// `F0R_PLUGIN_TYPE_FILTER`: one input, one output.
pub const PLUGIN_TYPE_FILTER: c_int = 0;
/// `F0R_PLUGIN_TYPE_SOURCE`: no input, one output.
pub const PLUGIN_TYPE_SOURCE: c_int = 1;
/// `F0R_PLUGIN_TYPE_MIXER2`: two inputs.
pub const PLUGIN_TYPE_MIXER2: c_int = 2;
/// `F0R_PLUGIN_TYPE_MIXER3`: three inputs.
pub const PLUGIN_TYPE_MIXER3: c_int = 3;

/// `F0R_COLOR_MODEL_BGRA8888`: bytes B, G, R, A in memory.
pub const COLOR_MODEL_BGRA8888: c_int = 0;
/// `F0R_COLOR_MODEL_RGBA8888`: bytes R, G, B, A in memory.
pub const COLOR_MODEL_RGBA8888: c_int = 1;
/// `F0R_COLOR_MODEL_PACKED32`: any 4-byte layout; the plugin does not look at channels.
pub const COLOR_MODEL_PACKED32: c_int = 2;

/// `F0R_PARAM_BOOL`: a double, >= 0.5 is true.
pub const PARAM_BOOL: c_int = 0;
/// `F0R_PARAM_DOUBLE`: a double, nominally in [0, 1].
pub const PARAM_DOUBLE: c_int = 1;
/// `F0R_PARAM_COLOR`: three floats r, g, b in [0, 1].
pub const PARAM_COLOR: c_int = 2;
/// `F0R_PARAM_POSITION`: two doubles x, y in [0, 1].
pub const PARAM_POSITION: c_int = 3;
/// `F0R_PARAM_STRING`: a `char*`.
pub const PARAM_STRING: c_int = 4;

/// `f0r_plugin_info_t`.
#[repr(C)]
#[derive(Debug)]
pub struct PluginInfo {
    /// Plugin name.
    pub name: *const c_char,
    /// Author.
    pub author: *const c_char,
    /// One of the `PLUGIN_TYPE_*` constants.
    pub plugin_type: c_int,
    /// One of the `COLOR_MODEL_*` constants.
    pub color_model: c_int,
    /// frei0r API version the plugin was written for.
    pub frei0r_version: c_int,
    /// Plugin major version.
    pub major_version: c_int,
    /// Plugin minor version.
    pub minor_version: c_int,
    /// Number of parameters.
    pub num_params: c_int,
    /// What it does.
    pub explanation: *const c_char,
}

impl Default for PluginInfo {
    fn default() -> Self {
        PluginInfo {
            name: std::ptr::null(),
            author: std::ptr::null(),
            plugin_type: -1,
            color_model: -1,
            frei0r_version: 0,
            major_version: 0,
            minor_version: 0,
            num_params: 0,
            explanation: std::ptr::null(),
        }
    }
}

/// `f0r_param_info_t`.
#[repr(C)]
#[derive(Debug)]
pub struct ParamInfo {
    /// Parameter name.
    pub name: *const c_char,
    /// One of the `PARAM_*` constants.
    pub param_type: c_int,
    /// What it does.
    pub explanation: *const c_char,
}

impl Default for ParamInfo {
    fn default() -> Self {
        ParamInfo {
            name: std::ptr::null(),
            param_type: -1,
            explanation: std::ptr::null(),
        }
    }
}

/// `f0r_param_color_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ParamColor {
    /// Red, 0..1.
    pub r: f32,
    /// Green, 0..1.
    pub g: f32,
    /// Blue, 0..1.
    pub b: f32,
}

/// `f0r_param_position_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ParamPosition {
    /// x, 0..1.
    pub x: c_double,
    /// y, 0..1.
    pub y: c_double,
}

/// `f0r_instance_t`.
pub type InstanceHandle = *mut c_void;

/// `int f0r_init(void)`.
pub type InitFn = unsafe extern "C" fn() -> c_int;
/// `void f0r_deinit(void)`.
pub type DeinitFn = unsafe extern "C" fn();
/// `void f0r_get_plugin_info(f0r_plugin_info_t*)`.
pub type GetPluginInfoFn = unsafe extern "C" fn(*mut PluginInfo);
/// `void f0r_get_param_info(f0r_param_info_t*, int)`.
pub type GetParamInfoFn = unsafe extern "C" fn(*mut ParamInfo, c_int);
/// `f0r_instance_t f0r_construct(unsigned int width, unsigned int height)`.
pub type ConstructFn = unsafe extern "C" fn(c_uint, c_uint) -> InstanceHandle;
/// `void f0r_destruct(f0r_instance_t)`.
pub type DestructFn = unsafe extern "C" fn(InstanceHandle);
/// `void f0r_set_param_value(f0r_instance_t, f0r_param_t, int)` (also `f0r_get_param_value`).
pub type ParamValueFn = unsafe extern "C" fn(InstanceHandle, *mut c_void, c_int);
/// `void f0r_update(f0r_instance_t, double time, const uint32_t* in, uint32_t* out)`.
pub type UpdateFn = unsafe extern "C" fn(InstanceHandle, c_double, *const u32, *mut u32);
/// `void f0r_update2(f0r_instance_t, double time, const uint32_t* in1, in2, in3, uint32_t* out)`.
pub type Update2Fn =
    unsafe extern "C" fn(InstanceHandle, c_double, *const u32, *const u32, *const u32, *mut u32);

/// A plugin's entry points, looked up once when the library is loaded.
#[derive(Debug, Clone, Copy)]
pub struct Api {
    /// `f0r_init`.
    pub init: InitFn,
    /// `f0r_deinit`, if the plugin has one.
    pub deinit: Option<DeinitFn>,
    /// `f0r_get_plugin_info`.
    pub get_plugin_info: GetPluginInfoFn,
    /// `f0r_get_param_info`.
    pub get_param_info: GetParamInfoFn,
    /// `f0r_construct`.
    pub construct: ConstructFn,
    /// `f0r_destruct`.
    pub destruct: DestructFn,
    /// `f0r_set_param_value`.
    pub set_param_value: ParamValueFn,
    /// `f0r_get_param_value`.
    pub get_param_value: ParamValueFn,
    /// `f0r_update`, if present.
    pub update: Option<UpdateFn>,
    /// `f0r_update2`, if present.
    pub update2: Option<Update2Fn>,
}

impl Api {
    /// Looks up every entry point in `lib`. The error is the name of the first missing symbol.
    ///
    /// # Safety
    /// `lib` must be a frei0r plugin, so that each symbol found has the signature frei0r.h gives
    /// it. The returned pointers are valid only while `lib` stays loaded.
    pub unsafe fn load(lib: &libloading::Library) -> Result<Self, &'static str> {
        macro_rules! sym {
            ($name:literal, $ty:ty) => {
                // SAFETY: the caller guarantees the library is a frei0r plugin, so the symbol has
                // the frei0r.h signature `$ty`; the pointer is copied out and its validity is tied
                // to the library by the caller.
                match unsafe { lib.get::<$ty>(concat!($name, "\0").as_bytes()) } {
                    Ok(s) => Some(*s),
                    Err(_) => None,
                }
            };
        }
        fn required<T>(v: Option<T>, name: &'static str) -> Result<T, &'static str> {
            v.ok_or(name)
        }
        let init = required(sym!("f0r_init", InitFn), "f0r_init")?;
        let update = sym!("f0r_update", UpdateFn);
        let update2 = sym!("f0r_update2", Update2Fn);
        if update.is_none() && update2.is_none() {
            return Err("f0r_update");
        }
        Ok(Api {
            init,
            deinit: sym!("f0r_deinit", DeinitFn),
            get_plugin_info: required(
                sym!("f0r_get_plugin_info", GetPluginInfoFn),
                "f0r_get_plugin_info",
            )?,
            get_param_info: required(
                sym!("f0r_get_param_info", GetParamInfoFn),
                "f0r_get_param_info",
            )?,
            construct: required(sym!("f0r_construct", ConstructFn), "f0r_construct")?,
            destruct: required(sym!("f0r_destruct", DestructFn), "f0r_destruct")?,
            set_param_value: required(
                sym!("f0r_set_param_value", ParamValueFn),
                "f0r_set_param_value",
            )?,
            get_param_value: required(
                sym!("f0r_get_param_value", ParamValueFn),
                "f0r_get_param_value",
            )?,
            update,
            update2,
        })
    }
}
