/*{
  "DESCRIPTION": "Sobel edges (luma, 3x3), for scripts/bench-isf: the nearest to frei0r-sobel.",
  "CREDIT": "framepipe, MIT",
  "ISFVSN": "2",
  "CATEGORIES": ["Stylize"],
  "INPUTS": [ { "NAME": "inputImage", "TYPE": "image" } ]
}*/

float luma(vec2 px) {
  return dot(IMG_NORM_PIXEL(inputImage, px / RENDERSIZE).rgb, vec3(0.299, 0.587, 0.114));
}

void main() {
  vec2 p = gl_FragCoord.xy;
  float tl = luma(p + vec2(-1.0, 1.0)), t = luma(p + vec2(0.0, 1.0)), tr = luma(p + vec2(1.0, 1.0));
  float l = luma(p + vec2(-1.0, 0.0)), r = luma(p + vec2(1.0, 0.0));
  float bl = luma(p + vec2(-1.0, -1.0)), b = luma(p + vec2(0.0, -1.0)), br = luma(p + vec2(1.0, -1.0));
  float gx = (tr + 2.0 * r + br) - (tl + 2.0 * l + bl);
  float gy = (tl + 2.0 * t + tr) - (bl + 2.0 * b + br);
  float e = clamp(length(vec2(gx, gy)), 0.0, 1.0);
  gl_FragColor = vec4(vec3(e), 1.0);
}
