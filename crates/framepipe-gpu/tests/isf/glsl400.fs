/*{
  "ISFVSN": "2",
  "DESCRIPTION": "Test: an int given to a uint, which GLSL 4.00 converts and 3.30 refuses",
  "INPUTS": []
}*/
void main() {
    uint u = 51;
    gl_FragColor = vec4(float(u) / 255.0, 0.0, 0.0, 1.0);
}
