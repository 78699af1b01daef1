module {
  tosa.variable @s = dense<[-4, 27, 16, 22, -20, -3, 26, 16]> : tensor<8xi8>
  func.func @main(%arg0: tensor<8xi8> {tosa.tensor_name = "input-0"}) -> (tensor<8xi8> {tosa.tensor_name = "result-0"}) {
    %one = "tosa.const"() <{values = dense<1> : tensor<1xi8>}> : () -> tensor<1xi8>
    %v0 = tosa.variable_read @s : tensor<8xi8>
    %h = tosa.arithmetic_right_shift %v0, %one {round = true} : (tensor<8xi8>, tensor<1xi8>) -> tensor<8xi8>
    %x = tosa.bitwise_xor %h, %arg0 : (tensor<8xi8>, tensor<8xi8>) -> tensor<8xi8>
    %c = tosa.clamp %x {min_val = -100 : i8, max_val = 100 : i8} : (tensor<8xi8>) -> tensor<8xi8>
    tosa.variable_write @s, %c : tensor<8xi8>
    %v2 = tosa.variable_read @s : tensor<8xi8>
    return %v2 : tensor<8xi8>
  }
}
