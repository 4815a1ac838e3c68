/*{
  "ISFVSN": "2",
  "DESCRIPTION": "Test: one input of every ISF type",
  "CREDIT": "framepipe tests",
  "CATEGORIES": ["Test"],
  "INPUTS": [
    { "NAME": "inputImage", "TYPE": "image" },
    { "NAME": "flash", "TYPE": "event" },
    { "NAME": "invert", "TYPE": "bool", "DEFAULT": true },
    { "NAME": "mode", "TYPE": "long", "VALUES": [0, 1, 4], "LABELS": ["Off", "Soft", "Hard"], "DEFAULT": 1 },
    { "NAME": "count", "TYPE": "long", "MIN": 1, "MAX": 8, "DEFAULT": 3 },
    { "NAME": "amount", "TYPE": "float", "MIN": 0.0, "MAX": 2.0, "DEFAULT": 0.5 },
    { "NAME": "center", "TYPE": "point2D", "DEFAULT": [32, 24] },
    { "NAME": "tint", "TYPE": "color", "DEFAULT": [1.0, 0.5, 0.25, 1.0] },
    { "NAME": "width", "TYPE": "float", "DEFAULT": 0.25 },
    { "NAME": "wave", "TYPE": "audio", "MAX": 64 },
    { "NAME": "spectrum", "TYPE": "audioFFT" }
  ]
}*/
void main() {
    vec4 c = IMG_THIS_PIXEL(inputImage);
    float a = IMG_NORM_PIXEL(wave, vec2(0.5)).r;
    float f = IMG_NORM_PIXEL(spectrum, vec2(0.5)).r;
    gl_FragColor = vec4(float(mode) / 4.0, amount / 2.0, a, flash ? 1.0 : f + tint.b * 0.0 + center.x * 0.0 + float(count) * 0.0 + (invert ? 0.0 : 0.0) + width * 0.0);
}
