module {
  tosa.variable @d = dense<[-24, 22, -6, 22, 20]> : tensor<5xi8>
  func.func @main(%arg0: tensor<5xi8> {tosa.tensor_name = "input-0"}) -> (tensor<5xi8> {tosa.tensor_name = "result-0"}, tensor<5xi8> {tosa.tensor_name = "result-1"}) {
    %v0 = tosa.variable_read @d : tensor<5xi8>
    tosa.variable_write @d, %arg0 : tensor<5xi8>
    %v1 = tosa.variable_read @d : tensor<5xi8>
    return %v0, %v1 : tensor<5xi8>, tensor<5xi8>
  }
}
