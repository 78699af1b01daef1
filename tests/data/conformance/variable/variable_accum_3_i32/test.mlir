module {
  tosa.variable @acc = dense<[477713058, 134320234, 197761701]> : tensor<3xi32>
  func.func @main(%arg0: tensor<3xi32> {tosa.tensor_name = "input-0"}) -> (tensor<3xi32> {tosa.tensor_name = "result-0"}, tensor<3xi32> {tosa.tensor_name = "result-1"}) {
    %v0 = tosa.variable_read @acc : tensor<3xi32>
    %v1 = tosa.add %v0, %arg0 : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    tosa.variable_write @acc, %v1 : tensor<3xi32>
    %v2 = tosa.variable_read @acc : tensor<3xi32>
    return %v0, %v2 : tensor<3xi32>, tensor<3xi32>
  }
}
