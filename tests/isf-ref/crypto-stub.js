// math.js (vendored by interactive-shader-format) asks for node's crypto, to seed random numbers; the browser has its own.
module.exports = {};
