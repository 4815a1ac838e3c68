//! An ISF file loaded: read (with its `.vs`), parsed, assembled into GLSL 330, and its
//! `IMPORTED` images decoded. What an element is built from, and what a reload hands a
//! running node.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use framepipe_isf::{Role, Shader};

use super::gl::Source;
use super::imported::{self, Image};

/// A shader ready to be compiled.
#[derive(Debug)]
pub struct Loaded {
    /// The `.fs` file (as given).
    pub path: PathBuf,
    /// Its header and GLSL.
    pub shader: Shader,
    /// The generated GLSL and how to name its lines.
    pub source: Source,
    /// Its `IMPORTED` images, decoded.
    pub images: Vec<Image>,
}

impl Loaded {
    /// Reads, parses and assembles the `.fs` file at `path` and decodes its images. The error
    /// names the file and, for a header or GLSL error, the place in it.
    pub fn read(path: &Path) -> Result<Loaded, String> {
        let shown = path.display().to_string();
        let (fs, vs) = framepipe_isf::read_files(path).map_err(|e| format!("{shown}: {e}"))?;
        let shader = Shader::parse(&fs).map_err(|e| format!("{shown}: {e}"))?;
        Self::from_shader(path, shader, vs.as_deref())
    }

    /// Assembles a parsed shader (its file at `path`, for messages and imported images) with
    /// the `.vs` text, if any, and decodes its images.
    pub fn from_shader(path: &Path, shader: Shader, vs: Option<&str>) -> Result<Loaded, String> {
        let shown = path.display().to_string();
        let program = shader.assemble(vs).map_err(|e| format!("{shown}: {e}"))?;
        let vertex_file = match vs {
            Some(_) => {
                let ext = if path.with_extension("vs").is_file() {
                    "vs"
                } else {
                    "vert"
                };
                path.with_extension(ext).display().to_string()
            }
            None => format!("{shown} (the default vertex shader)"),
        };
        let mut images = Vec::with_capacity(shader.imported.len());
        for m in &shader.imported {
            let file = imported::resolve(path, &m.path);
            let picture = imported::load(&file)
                .map_err(|e| format!("{shown}: IMPORTED {:?}: {e}", m.name))?;
            images.push(Image {
                name: m.name.clone(),
                picture: Arc::new(picture),
            });
        }
        Ok(Loaded {
            path: path.to_path_buf(),
            source: Source {
                program,
                fragment_file: shown,
                vertex_file,
            },
            shader,
            images,
        })
    }

    /// The shader's role.
    pub fn role(&self) -> Role {
        self.shader.role()
    }

    /// How many frames it takes (its image inputs).
    pub fn frame_inputs(&self) -> usize {
        self.shader.frame_inputs().len()
    }
}
