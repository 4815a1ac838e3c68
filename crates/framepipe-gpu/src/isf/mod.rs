//! ISF shaders (the Interactive Shader Format, <https://github.com/mrRay/ISF_Spec>, 2.0) as
//! GPU elements: `isf location=FILE.fs`, and `isf-NAME` for every `.fs` file in the ISF
//! folders ([`library`]). The file is read and assembled by `framepipe-isf`; this module
//! renders it.
//!
//! | file | job |
//! |---|---|
//! | [`factory`] | [`IsfFactory`]: kind from the image inputs, properties, negotiation, memory |
//! | [`inputs`] | `INPUTS` as properties and their values as uniforms |
//! | [`node`] | [`IsfNode`]: the passes, buffers and uniforms of one running shader |
//! | [`gl`] | compiling with the log mapped to the `.fs` lines; quad, sampler, textures |
//! | [`loaded`] | a file read, parsed, assembled, its images decoded |
//! | [`imported`] | `IMPORTED` PNG and JPEG images |
//! | [`check`] | the build-time compile in a context of its own |
//! | [`reload`] | a running node reloading its changed file |
//! | [`library`] | the ISF folders, `isf-NAME` elements, and `isf location=`'s properties |
//! | [`harness`] | [`render_frames`]: a shader's frames without the engine, for tests and peers |

pub mod check;
pub mod factory;
pub mod gl;
pub mod harness;
pub mod imported;
pub mod inputs;
pub mod library;
pub mod loaded;
pub mod node;
pub mod reload;

pub use factory::IsfFactory;
pub use harness::{render_frames, render_frames_with};
pub use library::{file_entry, isf_desc, register};
pub use loaded::Loaded;
pub use node::IsfNode;

/// The properties an element has besides its inputs: an input of one of these names is the
/// property `input-NAME` ([`inputs::prop_name`]).
pub const OWN_PROPS: &[&str] = &["location", "width", "height", "rate", "frames"];
