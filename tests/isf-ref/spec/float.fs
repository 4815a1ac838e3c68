/*{
  "DESCRIPTION": "framepipe spec check: a FLOAT, PERSISTENT buffer holds values outside 0..1 and steps too small for 8 bits; the last pass scales them back. With 8-bit storage red stops at 0.125, green is 1 and blue stays 0.",
  "CREDIT": "framepipe, MIT",
  "ISFVSN": "2",
  "CATEGORIES": ["Test"],
  "INPUTS": [ ],
  "PASSES": [
    { "TARGET": "wide", "FLOAT": true, "PERSISTENT": true },
    { }
  ]
}*/

void main() {
  vec2 p = isf_FragNormCoord;
  if (PASSINDEX == 0) {
    vec4 prev = IMG_NORM_PIXEL(wide, p);
    // red: 8x, above 1; green: below 0; blue: 1/512 more every frame
    gl_FragColor = vec4(8.0 * p.x, p.y - 1.0, prev.b + 1.0 / 512.0, 1.0);
  } else {
    vec4 w = IMG_NORM_PIXEL(wide, p);
    gl_FragColor = vec4(w.r / 8.0, w.g + 1.0, w.b * 64.0, 1.0);
  }
}
