/*{
  "DESCRIPTION": "Brightness (0.5 leaves the picture as it is), for scripts/bench-isf: frei0r-brightness's job.",
  "CREDIT": "framepipe, MIT",
  "ISFVSN": "2",
  "CATEGORIES": ["Color Adjustment"],
  "INPUTS": [
    { "NAME": "inputImage", "TYPE": "image" },
    { "NAME": "brightness", "TYPE": "float", "MIN": 0.0, "MAX": 1.0, "DEFAULT": 0.6 }
  ]
}*/

void main() {
  vec4 c = IMG_THIS_PIXEL(inputImage);
  gl_FragColor = vec4(clamp(c.rgb + (brightness - 0.5) * 2.0, 0.0, 1.0), c.a);
}
