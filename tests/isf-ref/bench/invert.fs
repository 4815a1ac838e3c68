/*{
  "DESCRIPTION": "Inverts red, green and blue, for scripts/bench-isf: frei0r-invert0r's job.",
  "CREDIT": "framepipe, MIT",
  "ISFVSN": "2",
  "CATEGORIES": ["Color Effect"],
  "INPUTS": [ { "NAME": "inputImage", "TYPE": "image" } ]
}*/

void main() {
  vec4 c = IMG_THIS_PIXEL(inputImage);
  gl_FragColor = vec4(vec3(1.0) - c.rgb, c.a);
}
