/*{
  "ISFVSN": "2",
  "DESCRIPTION": "Test: draws its audioFFT input, one column per bin, as grey",
  "CATEGORIES": ["Test"],
  "INPUTS": [
    { "NAME": "inputImage", "TYPE": "image" },
    { "NAME": "spectrum", "TYPE": "audioFFT", "MAX": 64 }
  ]
}*/
void main() {
    float f = IMG_NORM_PIXEL(spectrum, vec2(isf_FragNormCoord.x, 0.5)).r;
    gl_FragColor = vec4(f, f, f, 1.0);
}
