module {
  tosa.variable @d = dense<[[-3111, 7342, 6005, 1201], [7969, -2621, -5939, -3744], [-6729, 7406, -4605, -910]]> : tensor<3x4xi16>
  func.func @main(%arg0: tensor<3x4xi16> {tosa.tensor_name = "input-0"}) -> (tensor<3x4xi16> {tosa.tensor_name = "result-0"}, tensor<3x4xi16> {tosa.tensor_name = "result-1"}) {
    %v0 = tosa.variable_read @d : tensor<3x4xi16>
    tosa.variable_write @d, %arg0 : tensor<3x4xi16>
    %v1 = tosa.variable_read @d : tensor<3x4xi16>
    return %v0, %v1 : tensor<3x4xi16>, tensor<3x4xi16>
  }
}
