/*{
  "DESCRIPTION": "framepipe spec check: every input type (event, bool, long, float, point2D, color, image), TIME-driven. Smooth in every value, so that GPUs' float differences stay small differences.",
  "CREDIT": "framepipe, MIT",
  "ISFVSN": "2",
  "CATEGORIES": ["Test"],
  "INPUTS": [
    { "NAME": "inputImage", "TYPE": "image" },
    { "NAME": "flash", "TYPE": "event" },
    { "NAME": "invert", "TYPE": "bool", "DEFAULT": false },
    { "NAME": "channel", "TYPE": "long", "VALUES": [0, 1, 2], "LABELS": ["red", "green", "blue"], "DEFAULT": 1 },
    { "NAME": "gain", "TYPE": "float", "MIN": 0.0, "MAX": 2.0, "DEFAULT": 0.75 },
    { "NAME": "center", "TYPE": "point2D", "DEFAULT": [20.0, 30.0], "MIN": [0.0, 0.0], "MAX": [64.0, 48.0] },
    { "NAME": "tint", "TYPE": "color", "DEFAULT": [1.0, 0.5, 0.25, 1.0] }
  ]
}*/

void main() {
  vec4 src = IMG_THIS_PIXEL(inputImage);
  vec3 c = src.rgb * tint.rgb * gain;
  // the long keeps one channel as it came
  if (channel == 0) c.r = src.r;
  else if (channel == 1) c.g = src.g;
  else c.b = src.b;
  if (invert) c = vec3(1.0) - c;
  // a soft ring around the point2D (pixels), growing with TIME
  float d = distance(gl_FragCoord.xy, center);
  float ring = smoothstep(3.0, 0.0, abs(d - (4.0 + 60.0 * TIME)));
  c = mix(c, vec3(1.0, 1.0, 0.0), ring);
  if (flash) c = mix(c, vec3(1.0), 0.5);
  gl_FragColor = vec4(clamp(c, 0.0, 1.0), 1.0);
}
