// The reference side of framepipe's ISF and gl-transitions peer checks, run in headless
// Chromium's WebGL. Bundled by esbuild into one classic script (the tests run
// `node_modules/.bin/esbuild harness.js --bundle`) and evaluated in a blank page; it defines
// `window.isfRef`:
//
// * `renderIsf(job)`: the ISF reference renderer for the web (npm `interactive-shader-format`)
//   draws `job.frames` frames of one shader; returns each frame's RGBA pixels, top row first,
//   base64.
// * `renderTransition(job)`: gl-transitions' own renderer (npm `gl-transition`) draws one
//   transition of the collection (npm `gl-transitions`) at each of `job.progress`.
// * `benchIsfChain(job)`: frames per second of a chain of ISF filters, each on its own canvas,
//   each reading the previous one's canvas (what a web page chaining filters does).
//
// Where the harness steps into the renderer, and why (each is the least that makes its output
// a function of the job alone):
// * TIME, TIMEDELTA, FRAMEINDEX and DATE come from the job (the renderer reads the wall clock);
// * image inputs are bound again at the start of every draw: the renderer resets its texture
//   unit counter there, and the first pass buffer would otherwise share a unit with the image
//   input set before it;
// * a pass reads what the earlier passes of the same frame wrote, as the spec says: the
//   renderer binds every buffer's texture once, before the first pass, so a later pass would
//   read the buffer as the previous frame left it (the final picture of a multi-pass shader
//   one frame late, or empty on the first frame). When a pass begins, the buffer the pass
//   before it wrote is flipped and bound again (with its size: on the first frame the
//   renderer gives IMG_SIZE of a buffer not drawn yet as undefined), and its end-of-frame
//   flip is skipped;
// * draw() calls bindTexture(null) around every pass on whatever texture unit is active,
//   which is the last buffer's: that buffer would read as black in later passes. Each pass
//   begins with a fresh, unused unit active;
// * ISF 1.0 files go through the package's own Upgrader first (its Renderer does not call it).
// * FLOAT passes need OES_texture_float (and rendering into, and filtering, float textures),
//   which the harness enables on every context, as a page using the renderer must.
// Deviations of the reference left as they are (the peer checks avoid them, and say so):
// IMG_PIXEL divides by RENDERSIZE, not the image's size; `$WIDTH`/`$HEIGHT` are replaced
// once per expression.
const Renderer = require('interactive-shader-format/lib/ISFRenderer.js');
const ISFBuffer = require('interactive-shader-format/lib/ISFBuffer.js');
const Upgrader = require('interactive-shader-format/lib/ISFUpgrader.js');

const bufferFlip = ISFBuffer.prototype.flip;
ISFBuffer.prototype.flip = function flip() {
  if (this.flippedThisFrame) {
    this.flippedThisFrame = false;
    return;
  }
  bufferFlip.call(this);
};
const createTransition = require('gl-transition').default;
const transitions = require('gl-transitions');

function fromBase64(text) {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function toBase64(bytes) {
  let bin = '';
  const step = 0x8000;
  for (let i = 0; i < bytes.length; i += step) {
    bin += String.fromCharCode.apply(null, bytes.subarray(i, i + step));
  }
  return btoa(bin);
}

function webgl(width, height) {
  const canvas = document.createElement('canvas');
  canvas.width = width;
  canvas.height = height;
  const gl = canvas.getContext('webgl', {
    antialias: false,
    premultipliedAlpha: false,
    preserveDrawingBuffer: true,
    alpha: true,
    depth: false,
    stencil: false,
  });
  if (!gl) throw new Error('no WebGL context (is SwiftShader enabled?)');
  // FLOAT passes: the renderer asks for gl.FLOAT textures, which WebGL 1 has only with these
  // (rendering into them, and sampling them with linear filtering).
  for (const ext of ['OES_texture_float', 'WEBGL_color_buffer_float', 'OES_texture_float_linear']) {
    if (!gl.getExtension(ext)) throw new Error(`WebGL here lacks ${ext}`);
  }
  gl.pixelStorei(gl.UNPACK_COLORSPACE_CONVERSION_WEBGL, gl.NONE);
  return { canvas, gl };
}

// The drawing buffer's pixels, top row first (readPixels gives the bottom row first).
function readTopFirst(gl, width, height) {
  const px = new Uint8Array(width * height * 4);
  gl.readPixels(0, 0, width, height, gl.RGBA, gl.UNSIGNED_BYTE, px);
  const out = new Uint8Array(px.length);
  const row = width * 4;
  for (let y = 0; y < height; y++) {
    out.set(px.subarray((height - 1 - y) * row, (height - y) * row), y * row);
  }
  return out;
}

// An RGBA picture (top row first) as a 2D canvas, the kind of value the ISF renderer takes
// for an image input. Opaque pictures only: a 2D canvas keeps premultiplied colour.
function pictureCanvas(image) {
  const canvas = document.createElement('canvas');
  canvas.width = image.width;
  canvas.height = image.height;
  const ctx = canvas.getContext('2d');
  const data = new ImageData(new Uint8ClampedArray(fromBase64(image.rgba).buffer), image.width, image.height);
  ctx.putImageData(data, 0, 0);
  return canvas;
}

function isfRenderer(gl, job) {
  let fs = job.fs;
  let vs = job.vs || undefined;
  if (/PERSISTENT_BUFFERS|vv_FragNormCoord/.test(fs)) fs = Upgrader.convertFragment(fs);
  if (vs && /vv_/.test(vs)) vs = Upgrader.convertVertex(vs);
  const r = new Renderer(gl);
  r.setValue = function setValue(name, value) {
    if (name === 'PASSINDEX' && value > 0) {
      const before = this.model.passes[value - 1];
      if (before.target && !before.buffer.flippedThisFrame) {
        before.buffer.flip();
        before.buffer.flippedThisFrame = true;
        before.buffer.readTexture().bind(this.program.getUniformLocation(before.buffer.name));
        Renderer.prototype.setValue.call(this, `_${before.buffer.name}_imgSize`, [before.buffer.width, before.buffer.height]);
      }
    }
    if (name === 'PASSINDEX') {
      // draw() unbinds the active texture unit around each pass: make that a spare one.
      this.gl.activeTexture(this.gl.TEXTURE0 + this.contextState.newTextureIndex());
    }
    Renderer.prototype.setValue.call(this, name, value);
  };
  r.loadSource(fs, vs);
  if (!r.valid) throw new Error(`reference renderer refused the shader: ${r.error && (r.error.message || r.error)}`);
  return r;
}

function setInputs(r, inputs) {
  for (const name of Object.keys(inputs || {})) r.setValue(name, inputs[name]);
}

// Makes `setDateUniforms` (called by draw() right after it resets the texture units) set the
// frame's clock from `clock` and bind the image inputs again.
function takeOverClock(r, clock, imageNames) {
  r.setDateUniforms = function setDateUniforms() {
    this.setValue('TIME', clock.time);
    this.setValue('TIMEDELTA', clock.timeDelta);
    this.setValue('FRAMEINDEX', clock.frameIndex);
    this.setValue('DATE', clock.date);
    for (const name of imageNames) this.pushTexture(this.uniforms[name]);
  };
}

// job: { fs, vs?, width, height, inputs: {name: value}, images: {name: {width, height, rgba}},
//        frames: [{ time, timeDelta?, frameIndex, inputs? }], date? }
function renderIsf(job) {
  const { gl } = webgl(job.width, job.height);
  const r = isfRenderer(gl, job);
  setInputs(r, job.inputs);
  const imageNames = Object.keys(job.images || {});
  for (const name of imageNames) r.setValue(name, pictureCanvas(job.images[name]));
  const clock = { time: 0, timeDelta: 0, frameIndex: 0, date: job.date || [2026, 1, 1, 0] };
  takeOverClock(r, clock, imageNames);
  const canvas = gl.canvas;
  const out = [];
  for (const f of job.frames) {
    clock.time = f.time;
    clock.timeDelta = f.timeDelta || 0;
    clock.frameIndex = f.frameIndex;
    setInputs(r, f.inputs);
    r.draw(canvas);
    const err = gl.getError();
    if (err !== gl.NO_ERROR) throw new Error(`WebGL error ${err} drawing frame ${f.frameIndex}`);
    out.push(toBase64(readTopFirst(gl, job.width, job.height)));
  }
  return out;
}

// A texture as gl-transition wants one (bind(unit) returns the unit; shape is [w, h]),
// from an RGBA picture, top row first (uploaded with the top row at v = 1).
function glTexture(gl, image) {
  const tex = gl.createTexture();
  gl.bindTexture(gl.TEXTURE_2D, tex);
  gl.pixelStorei(gl.UNPACK_FLIP_Y_WEBGL, true);
  gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA, image.width, image.height, 0, gl.RGBA, gl.UNSIGNED_BYTE, fromBase64(image.rgba));
  gl.pixelStorei(gl.UNPACK_FLIP_Y_WEBGL, false);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.LINEAR);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.LINEAR);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
  return {
    shape: [image.width, image.height],
    bind(unit) {
      gl.activeTexture(gl.TEXTURE0 + unit);
      gl.bindTexture(gl.TEXTURE_2D, tex);
      return unit;
    },
  };
}

function transitionByName(name) {
  const t = transitions.find(x => x.name === name);
  if (!t) throw new Error(`no transition named ${name} in gl-transitions`);
  return t;
}

// job: { name, width, height, from: {width, height, rgba}, to: {...}, progress: [p...],
//        params?: {name: value}, resizeMode? ('stretch' unless given) }
function renderTransition(job) {
  const { gl } = webgl(job.width, job.height);
  const t = transitionByName(job.name);
  // gl-transition draws one triangle over the viewport from the array buffer bound at
  // creation: a big triangle that covers the clip square.
  const buf = gl.createBuffer();
  gl.bindBuffer(gl.ARRAY_BUFFER, buf);
  gl.bufferData(gl.ARRAY_BUFFER, new Float32Array([-1, -1, -1, 4, 4, -1]), gl.STATIC_DRAW);
  const tr = createTransition(gl, t, { resizeMode: job.resizeMode || 'stretch' });
  const from = glTexture(gl, job.from);
  const to = glTexture(gl, job.to);
  gl.viewport(0, 0, job.width, job.height);
  const out = [];
  for (const p of job.progress) {
    tr.draw(p, from, to, job.width, job.height, job.params || {});
    const err = gl.getError();
    if (err !== gl.NO_ERROR) throw new Error(`WebGL error ${err} drawing ${job.name} at ${p}`);
    out.push(toBase64(readTopFirst(gl, job.width, job.height)));
  }
  return out;
}

// job: { shaders: [{fs, vs?, inputs?}], width, height, image: {width, height, rgba},
//        frames, rate }. Returns { fps, frames, seconds }; the last canvas's pixels are read
// back once at the end (so that every draw is done, not just queued).
function benchIsfChain(job) {
  const stages = job.shaders.map((s) => {
    const { gl } = webgl(job.width, job.height);
    const r = isfRenderer(gl, s);
    setInputs(r, s.inputs);
    return { gl, r, clock: { time: 0, timeDelta: 1 / job.rate, frameIndex: 0, date: [2026, 1, 1, 0] } };
  });
  let source = pictureCanvas(job.image);
  for (const st of stages) {
    st.r.setValue('inputImage', source);
    takeOverClock(st.r, st.clock, ['inputImage']);
    source = st.gl.canvas;
  }
  const draw = (n) => {
    for (const st of stages) {
      st.clock.time = n / job.rate;
      st.clock.frameIndex = n;
      st.r.draw(st.gl.canvas);
    }
  };
  draw(0); // compiles, allocates
  const last = stages[stages.length - 1].gl;
  readTopFirst(last, 1, 1);
  const t0 = performance.now();
  for (let n = 1; n <= job.frames; n++) draw(n);
  readTopFirst(last, 1, 1);
  const seconds = (performance.now() - t0) / 1000;
  return { fps: job.frames / seconds, frames: job.frames, seconds };
}

// What WebGL runs on here (the renderer string names SwiftShader when it is the software one).
function glInfo() {
  const { gl } = webgl(4, 4);
  const dbg = gl.getExtension('WEBGL_debug_renderer_info');
  return {
    vendor: gl.getParameter(dbg ? dbg.UNMASKED_VENDOR_WEBGL : gl.VENDOR),
    renderer: gl.getParameter(dbg ? dbg.UNMASKED_RENDERER_WEBGL : gl.RENDERER),
    version: gl.getParameter(gl.VERSION),
    glsl: gl.getParameter(gl.SHADING_LANGUAGE_VERSION),
  };
}

window.isfRef = {
  renderIsf,
  renderTransition,
  benchIsfChain,
  glInfo,
  transitionNames: () => transitions.map(t => t.name),
};
