/*{
  "ISFVSN": "2",
  "DESCRIPTION": "Test: the input on the left half, imported images on the right",
  "INPUTS": [ { "NAME": "inputImage", "TYPE": "image" } ],
  "IMPORTED": { "stamp": { "PATH": "stamp.png" }, "photo": { "PATH": "photo.jpg" } }
}*/
void main() {
    vec2 uv = isf_FragNormCoord;
    if (uv.x < 0.5) {
        gl_FragColor = IMG_THIS_PIXEL(inputImage);
    } else if (uv.y > 0.25) {
        gl_FragColor = IMG_NORM_PIXEL(stamp, vec2((uv.x - 0.5) * 2.0, (uv.y - 0.25) / 0.75));
    } else {
        gl_FragColor = IMG_NORM_PIXEL(photo, vec2(0.5)) * vec4(1.0, 1.0, 1.0, 0.0) + vec4(0.0, 0.0, 0.0, _photo_imgSize.x / 255.0);
    }
}
